// How gpualloc-bench-alloc times kernels of 10 us and more: gated batches.
//
// An event pair around one launch from the host also measures the time the
// GPU waits for that launch to arrive (several microseconds: a large part of
// a 10-40 us kernel). So samples are enqueued behind a gate, a one-thread
// kernel that waits until the host has enqueued the whole batch and then
// opens it; the GPU runs the batch back to back, and each event pair brackets
// one kernel that was already queued when the previous one ended. A sample
// is whatever a test enqueues (e.g. malloc kernel, verification, free
// kernel), with marks (events) between the parts it times.
//
// The gate waits at most gate_limit_ns (a host stalled for longer lets the
// batch run; the batch then reports gate_timed_out and its times may include
// launch gaps). Every kernel of a batch must have run once before (the
// warm-up): with lazy module loading, the first launch of a kernel behind a
// waiting kernel can wait for it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common.h"

namespace bench {

inline constexpr unsigned long long gate_limit_ns = 200'000'000;  // 0.2 s

__global__ void k_gate(volatile int* flags, unsigned long long limit_ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  while (flags[0] == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > limit_ns) {
      flags[1] = 1;
      return;
    }
    __nanosleep(1000);
  }
}

class gate {
 public:
  gate() {
    void* mapped = nullptr;
    BENCH_CUDA(cudaHostAlloc(&mapped, 2 * sizeof(int), cudaHostAllocMapped));
    host_ = static_cast<volatile int*>(mapped);
    BENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), mapped, 0));
    host_[0] = 1;
    host_[1] = 0;
  }
  ~gate() { cudaFreeHost(const_cast<int*>(host_)); }
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  // Enqueues a closed gate: what is enqueued after it waits.
  void close() {
    host_[0] = 0;
    host_[1] = 0;
    k_gate<<<1, 1>>>(device_, gate_limit_ns);
    BENCH_CUDA(cudaGetLastError());
  }
  void open() { __atomic_store_n(const_cast<int*>(&host_[0]), 1, __ATOMIC_SEQ_CST); }
  // After a synchronisation: did the gate open by itself?
  bool timed_out() const { return host_[1] != 0; }

 private:
  volatile int* host_ = nullptr;
  int* device_ = nullptr;
};

// One gate per process, never destroyed (its mapped flags must outlive every batch).
inline gate& the_gate() {
  static gate* g = new gate;
  return *g;
}

// Events recorded between the parts of a batch's samples.
class marks {
 public:
  explicit marks(size_t count) : events_(count) {
    for (cudaEvent_t& e : events_) BENCH_CUDA(cudaEventCreate(&e));
  }
  ~marks() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  marks(const marks&) = delete;
  marks& operator=(const marks&) = delete;

  void at(size_t i) { BENCH_CUDA(cudaEventRecord(events_.at(i))); }
  double ms(size_t from, size_t to) const {
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, events_.at(from), events_.at(to)));
    return ms;
  }
  size_t size() const { return events_.size(); }

 private:
  std::vector<cudaEvent_t> events_;
};

// When a point stops taking samples.
struct sample_limits {
  int max_samples = 15;            // --reps
  int min_samples = 3;             // --min-reps: taken even past the budget, within the hard limit
  int warmup = 1;                  // untimed samples first (at least 1: they load every kernel)
  int max_batch = 32;              // samples per gated batch (all enqueued while the gate waits:
                                   // keep a batch to a few hundred commands)
  double budget_ms = 2000;         // --budget-s: no new batch after this, once min_samples are in
  double hard_limit_ms = 8000;     // --hard-limit-s: no sample that would end after this
};

// What run_samples reports besides the samples themselves.
struct sample_run {
  int samples = 0;
  bool warmup_only = false;   // the warm-up sample is the only one (no time for another)
  bool gate_timed_out = false;
  bool cut_by_budget = false; // fewer than max_samples
  std::string note() const {
    std::string n;
    auto add = [&](const char* s) { n += (n.empty() ? "" : " ") + std::string(s); };
    if (warmup_only) add("warm-up sample only (no time for another)");
    if (cut_by_budget && !warmup_only) add("samples cut by time budget");
    if (gate_timed_out) add("gate timed out (times may include launch gaps)");
    return n;
  }
};

// Runs one point: `warmup` ungated samples, then gated batches until the
// limits say stop. The test supplies
//   before_batch(n)         host work before a batch of n samples (heap resets);
//                           returns the largest n it allows (>= 1)
//   enqueue(slot, m, first) enqueues sample `slot` of the batch, asynchronously,
//                           recording its marks at m.at(first + k)
//   collect(slot, m, first) reads that sample after the batch ran
// marks_per_sample marks per slot.
template <class BeforeBatch, class Enqueue, class Collect>
sample_run run_samples(const sample_limits& lim, int marks_per_sample, BeforeBatch before_batch, Enqueue enqueue,
                       Collect collect) {
  gate& g = the_gate();
  const int batch_cap = std::max(1, lim.max_batch);
  marks m(static_cast<size_t>(batch_cap) * marks_per_sample);
  sample_run run;
  const auto t0 = std::chrono::steady_clock::now();
  double per_sample_ms = 0;
  for (int w = 0; w < std::max(1, lim.warmup); ++w) {
    before_batch(1);
    const auto s0 = std::chrono::steady_clock::now();
    enqueue(0, m, 0);
    BENCH_CUDA(cudaDeviceSynchronize());
    per_sample_ms = wall_ms_since(s0);
  }
  while (run.samples < lim.max_samples) {
    const double elapsed = wall_ms_since(t0);
    if (run.samples >= lim.min_samples && elapsed > lim.budget_ms) break;
    if (elapsed + per_sample_ms > lim.hard_limit_ms) {
      if (run.samples == 0) {  // the warm-up is all there is
        collect(0, m, 0);
        run.samples = 1;
        run.warmup_only = true;
      }
      break;
    }
    // As many as the budget has room for, or as are missing to min_samples,
    // and none that would end past the hard limit.
    const double per = std::max(per_sample_ms, 1e-3);
    auto samples_in = [per](double ms) { return static_cast<int>(std::clamp(ms / per, 0.0, 1e6)); };
    const int by_budget = samples_in(lim.budget_ms - elapsed);
    const int by_hard = samples_in(lim.hard_limit_ms - elapsed);
    int n = std::min({lim.max_samples - run.samples, batch_cap, by_hard,
                      std::max(lim.min_samples - run.samples, by_budget)});
    n = std::max(1, std::min(n, before_batch(std::max(1, n))));
    const auto s0 = std::chrono::steady_clock::now();
    g.close();
    for (int i = 0; i < n; ++i) enqueue(i, m, static_cast<size_t>(i) * marks_per_sample);
    g.open();
    BENCH_CUDA(cudaDeviceSynchronize());
    BENCH_CUDA(cudaGetLastError());
    run.gate_timed_out |= g.timed_out();
    per_sample_ms = wall_ms_since(s0) / n;
    for (int i = 0; i < n; ++i) collect(i, m, static_cast<size_t>(i) * marks_per_sample);
    run.samples += n;
  }
  run.cut_by_budget = run.samples < lim.max_samples;
  return run;
}

}  // namespace bench
