// Utilisation figures of one strategy on CPU threads, shared by the parts
// tests of Gallatin and sm-slab (gallatin_parts.cpp, sm_slab_parts.cpp):
//
//  fill          the share of a fresh heap handed out in one size until each
//                thread's first NULL
//  churn share   the largest live share a heap keeps serving while threads
//                free a random block and allocate another, round after round
//  churn band    the GPU conformance suite's churn phase on CPU threads for
//                several promises (registry: churn): the NULLs per promise
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string_view>
#include <thread>
#include <vector>

#include "gpualloc/allocate.h"
#include "gpualloc/dispatch.h"
#include "gpualloc/registry.h"
#include "host_test.h"

namespace utilisation {

using host_test::rng;

// A heap of one strategy, laid out and initialised as libgpualloc does (on
// one thread), for `sms` SMs.
struct heap {
  heap(gpualloc::strategy_id id, std::uint64_t bytes, std::uint32_t sms = gpualloc::detail::host_sm_count) {
    memory_ = static_cast<std::byte*>(std::aligned_alloc(gpualloc::arena_alignment, bytes));
    h_ = new (memory_) gpualloc::heap_header{};
    h_->strategy = static_cast<std::uint32_t>(id);
    h_->heap_bytes = bytes;
    gpualloc::lay_out_heap(h_, bytes, true);
    gpualloc::plan_strategy(h_, gpualloc::device_facts{sms});
    for (int phase = 0; phase < gpualloc::init_phases(id); ++phase)
      gpualloc::init_strategy(h_, phase, 0, 1);
    h_->magic = gpualloc::heap_magic;
  }
  ~heap() { std::free(memory_); }
  gpualloc::heap_header* get() const { return h_; }
  double arena() const { return static_cast<double>(h_->space.bytes); }

 private:
  std::byte* memory_;
  gpualloc::heap_header* h_;
};

// Share of a fresh heap handed out in `size`-byte blocks by `threads` threads until each one's first NULL.
inline double fill(gpualloc::strategy_id id, std::uint64_t heap_bytes, std::uint64_t size, int threads) {
  heap H(id, heap_bytes);
  std::atomic<std::uint64_t> got{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      std::uint64_t n = 0;
      while (gpualloc::heap_malloc(H.get(), size) != nullptr) ++n;
      got += n;
    });
  for (auto& t : ts) t.join();
  return got * size / H.arena();
}

// Churn: `threads` threads each hold `share`/threads of the arena in blocks of
// 16 B .. `largest`, then free a random block and allocate a new one until
// every block was replaced `turnovers` times on average. True if no request
// returned NULL.
inline bool churn_holds(gpualloc::strategy_id id, std::uint64_t heap_bytes, double share, std::uint64_t largest, int threads, int turnovers) {
  heap H(id, heap_bytes);
  const std::uint64_t each = static_cast<std::uint64_t>(share * H.arena() / threads);
  std::atomic<bool> ok{true};
  std::barrier<> done(threads);  // nobody frees its set before all have churned
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      rng r(t + 1);
      auto size = [&] { return 16 * (1 + r.below(largest / 16)); };
      std::vector<std::pair<void*, std::uint64_t>> live;
      std::uint64_t held = 0;
      while (held < each && ok) {
        const std::uint64_t n = size();
        void* p = gpualloc::heap_malloc(H.get(), n);
        if (p == nullptr) ok = false;
        live.emplace_back(p, n);
        held += n;
      }
      const std::uint64_t rounds = turnovers * live.size();
      for (std::uint64_t i = 0; i < rounds && ok; ++i) {
        auto& victim = live[r.below(live.size())];
        gpualloc::heap_free(H.get(), victim.first);
        held -= victim.second;
        victim.second = size();
        victim.first = gpualloc::heap_malloc(H.get(), victim.second);
        held += victim.second;
        if (victim.first == nullptr) ok = false;
      }
      done.arrive_and_wait();
      for (auto& [p, n] : live) gpualloc::heap_free(H.get(), p);
    });
  for (auto& t : ts) t.join();
  return ok;
}

// The largest live share (to 1%) that churn keeps serving.
inline double churn_share(gpualloc::strategy_id id, std::uint64_t heap_bytes, std::uint64_t largest, int threads, int turnovers) {
  double lo = 0, hi = 1;
  while (hi - lo > 0.01) {
    const double mid = (lo + hi) / 2;
    (churn_holds(id, heap_bytes, mid, largest, threads, turnovers) ? lo : hi) = mid;
  }
  return lo;
}

// The GPU conformance suite's churn phase (tests/gpu/conformance.cu,
// churn_band) on CPU threads: the same plan (65536 sets of slots, live bytes
// kept in 80-95% of the promise, blocks of three powers of two chosen from
// the band's top), the same choice per operation, on a heap of the same size
// planned for an H100's 132 SMs (block contents are not written, so a 4 GiB
// heap commits only its tables). `turnovers` scales the operations: 1 is the
// GPU kernel's 65536 x 32. Each thread owns sets/threads of the sets, so no
// set needs a lock.
struct band_result {
  std::uint32_t min_size, max_size;
  std::uint64_t ops, allocs, nulls;
  double peak, at_first_null;  // committed bytes, shares of the heap
};

inline band_result churn_band(gpualloc::strategy_id id, std::uint64_t heap_bytes, double promise, double turnovers, int threads) {
  const auto capacity = static_cast<std::uint64_t>(promise * heap_bytes);
  const std::uint64_t high = capacity / 100 * 95, low = capacity / 100 * 80;
  const std::uint32_t sets = 1u << 16;
  std::uint32_t slots_per_set = 8;
  const std::uint64_t target = high / (std::uint64_t{sets} * slots_per_set / 2);
  std::uint32_t shift = 10;
  while (shift < 19 && (2ull << shift) <= target) ++shift;
  const std::uint32_t min_shift = std::max(10u, shift - 1), max_shift = std::min(20u, shift + 1);
  const std::uint64_t average = ((2ull << max_shift) - (1ull << min_shift)) / (max_shift - min_shift + 1);
  while (std::uint64_t{sets} * slots_per_set * average < high / 2 * 3 && slots_per_set < 64) slots_per_set *= 2;

  heap H(id, heap_bytes, 132);
  std::vector<std::pair<void*, std::uint32_t>> slots(std::uint64_t{sets} * slots_per_set, {nullptr, 0});
  std::atomic<std::uint64_t> committed{0}, peak{0}, allocs{0}, nulls{0}, first_null{0};
  const auto ops_per_thread = static_cast<std::uint64_t>(turnovers * sets * 32 / threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      rng r(t + 101);
      const std::uint32_t first_set = sets / threads * t, my_sets = sets / threads;
      for (std::uint64_t op = 0; op < ops_per_thread; ++op) {
        auto* s = &slots[std::uint64_t{first_set + static_cast<std::uint32_t>(r.below(my_sets))} * slots_per_set];
        std::uint32_t full = 0;
        for (std::uint32_t k = 0; k < slots_per_set; ++k) full += s[k].first != nullptr;
        const std::uint32_t empty = slots_per_set - full;
        const std::uint64_t now = committed.load(std::memory_order_relaxed);
        bool allocate = empty == 0 ? false : full == 0 ? true : now < low ? true : r.below(2) == 0;
        if (allocate) {
          auto pick = static_cast<std::uint32_t>(r.below(empty));
          std::pair<void*, std::uint32_t>* slot = s;
          for (std::uint32_t k = 0; k < slots_per_set; ++k)
            if (s[k].first == nullptr && pick-- == 0) slot = &s[k];
          const std::uint32_t bytes = 1u << (min_shift + r.below(max_shift - min_shift + 1));
          const std::uint64_t before = committed.fetch_add(bytes);
          if (before + bytes > high) {
            committed.fetch_sub(bytes);
            allocate = false;
          } else {
            std::uint64_t seen = peak.load();
            while (seen < before + bytes && !peak.compare_exchange_weak(seen, before + bytes)) {
            }
            void* p = gpualloc::heap_malloc(H.get(), bytes);
            if (p == nullptr) {
              committed.fetch_sub(bytes);
              std::uint64_t none = 0;
              if (nulls++ == 0) first_null.compare_exchange_strong(none, before + bytes);
            } else {
              *slot = {p, bytes};
              ++allocs;
            }
          }
        }
        if (!allocate && full > 0) {
          auto pick = static_cast<std::uint32_t>(r.below(full));
          std::pair<void*, std::uint32_t>* slot = s;
          for (std::uint32_t k = 0; k < slots_per_set; ++k)
            if (s[k].first != nullptr && pick-- == 0) slot = &s[k];
          gpualloc::heap_free(H.get(), slot->first);
          committed.fetch_sub(slot->second);
          *slot = {nullptr, 0};
        }
      }
    });
  for (auto& th : ts) th.join();
  for (auto& [p, n] : slots)
    if (p != nullptr) gpualloc::heap_free(H.get(), p);
  const double whole = static_cast<double>(heap_bytes);
  return {1u << min_shift, 1u << max_shift, ops_per_thread * threads, allocs, nulls, peak / whole,
          first_null / whole};
}

inline void churn_band_report(gpualloc::strategy_id id, double turnovers, std::vector<double> promises) {
  std::printf("the conformance churn phase on a 4 GiB heap planned for 132 SMs, 8 threads, %.0fx the GPU's operations:\n",
              turnovers);
  if (promises.empty()) promises = {0.05, 0.08, 0.10, 0.12, 0.15, 0.20, 0.30, 0.50, 0.75};
  for (double promise : promises) {
    const band_result b = churn_band(id, 4ull << 30, promise, turnovers, 8);
    std::printf("  promise %2.0f%% (live 80-95%% of it), blocks %5u-%5u B: %8" PRIu64 " allocations, %8" PRIu64
                " NULL (first at %.1f%% of the heap live), peak %.1f%%\n",
                100 * promise, b.min_size, b.max_size, b.allocs, b.nulls, 100 * b.at_first_null, 100 * b.peak);
  }
}

inline void report(gpualloc::strategy_id id, int turnovers) {
  const std::uint64_t MiB = 1u << 20;
  std::printf("utilisation of a 16 MiB heap until the first NULL (share of the arena, 1 and 8 threads):\n");
  for (std::uint64_t size : {16ull, 64ull, 1024ull, 4096ull, 8192ull, 9000ull, 65536ull, 1ull << 20})
    std::printf("  %7" PRIu64 " B: %5.1f%%  %5.1f%%\n", size, 100 * fill(id, 16 * MiB, size, 1),
                100 * fill(id, 16 * MiB, size, 8));
  std::printf("  1 MiB on a 1 GiB heap: %.1f%%\n", 100 * fill(id, 1024 * MiB, MiB, 8));
  std::printf(
      "churn: the largest live share of the arena that free-one, allocate-one keeps serving until every block\n"
      "was replaced %d times (16 MiB heap; 1 and 8 threads):\n",
      turnovers);
  for (std::uint64_t largest : {16ull, 1024ull, 4096ull})
    std::printf("  16 B .. %4" PRIu64 " B: %4.0f%%  %4.0f%%\n", largest,
                100 * churn_share(id, 16 * MiB, largest, 1, turnovers), 100 * churn_share(id, 16 * MiB, largest, 8, turnovers));
}

// A parts test's options for these figures: --report, --turnovers N,
// --churn-band T and its --promise P (percent).
struct options {
  bool report = false;
  int turnovers = 4;
  double churn_band_turnovers = 0;  // > 0: the churn band alone
  std::vector<double> promises;     // shares, for the churn band

  // False (the usage printed) on an option it does not know.
  bool parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "--report") {
        report = true;
      } else if (a == "--turnovers" && i + 1 < argc) {
        turnovers = std::atoi(argv[++i]);
      } else if (a == "--churn-band" && i + 1 < argc) {
        churn_band_turnovers = std::atof(argv[++i]);
      } else if (a == "--promise" && i + 1 < argc) {
        promises.push_back(std::atof(argv[++i]) / 100);
      } else {
        std::fprintf(stderr, "usage: %s [--report] [--turnovers N] [--churn-band TURNOVERS [--promise PERCENT]...]\n",
                     argv[0]);
        return false;
      }
    }
    return true;
  }
};

}  // namespace utilisation
