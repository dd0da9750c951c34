// gpualloc-bench-alloc: the allocation tests of the survey benchmark (Winter
// et al., as scaled by Gallatin) and of Vinkler & Havran, as unmodified CUDA.
// Device code calls plain malloc/free; compiled with gpualloc-clang++ these
// become the strategy chosen by GPUALLOC_STRATEGY.
//
//   gpualloc-bench-alloc --test T --points P1,P2,... [--mode warm|reset]
//                        [--reps N] [--warmup N] [--budget-s S] [--baseline]
//
// Tests (the driver bench/gpualloc-bench chooses the points):
//   single   one size per point: malloc kernel, then free kernel (times both);
//            also reports the address range of the live allocations (frag)
//   mixed    sizes drawn per thread from the powers of two in [lo, hi]
//   scaling  as single, the driver varies the thread count
//   acd      Alloc-Cycle-Dealloc: each thread allocates `iters` times, then
//            frees all, inside one kernel
//   prob     Probability test: `iters` launches; a thread without memory
//            allocates with p = 0.75, one with memory frees with p = 0.75
//   oom      utilization: batches of 100,000 allocations until the first NULL
//   init     context creation, first launch, and gpualloc_reset() time
//   regs     registers and local memory of every kernel
//
// A point is  SIZE[-SIZEMAX]xTHREADS[xITERS], e.g. 16x1048576, 16-4096x1048576,
// 16x65536x10. --baseline runs the same kernels with no allocation at all
// (each thread's "allocation" is a fixed slot of a cudaMalloc'd buffer).
//
// Correctness: after each timed malloc kernel (untimed) every thread fills its
// whole allocation with its own id and a check kernel reads it back. Two
// overlapping live allocations cannot both keep their pattern, so overlap,
// NULL returns and misaligned pointers (< 16 B) count as failures.
#include <cstdio>
#include <string>
#include <vector>

#include "common.h"

using bench::hash32;

namespace {

constexpr int kBlock = 256;

// How each allocation's size is chosen: one size, or a power of two in
// [lo, hi] drawn from the allocation's id.
struct size_rule {
  unsigned long long lo, hi;  // hi == 0: single size lo
  unsigned seed;
};

__host__ __device__ inline unsigned long long size_of(size_rule r, unsigned long long id) {
  if (r.hi == 0) return r.lo;
  unsigned classes = 1;
  while ((r.lo << classes) <= r.hi) ++classes;
  unsigned h = hash32(static_cast<unsigned>(id >> 32) ^ hash32(r.seed + 0x9e3779b9u));
  unsigned c = hash32(static_cast<unsigned>(id) ^ h) % classes;
  return r.lo << c;
}

__device__ inline unsigned long long gtid() { return blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; }

// Counters the verification kernels fill in.
struct check_result {
  unsigned long long nulls, misaligned, corrupt, checked;
  unsigned long long lowest, highest_end, requested;
};

// ---- the timed kernels -----------------------------------------------------

// Where a timed kernel's blocks come from. Allocates: the device heap
// (malloc/free, what is measured). Otherwise the no-allocation baseline: the
// same kernel shape, each block a fixed slot of a cudaMalloc'd buffer.
template <bool Allocates>
struct block_source {
  char* slots = nullptr;  // baseline only
  unsigned long long stride = 0;

  // The block of `bytes` for slot `slot`; the baseline keeps the size computation live.
  __device__ void* take(unsigned long long slot, unsigned long long bytes) const {
    if constexpr (Allocates)
      return malloc(bytes);
    else
      return bytes != 0 ? slots + slot * stride : nullptr;
  }
  __device__ void give_back(void* p) const {
    if constexpr (Allocates) free(p);
  }
};

template <bool Allocates>
__device__ void alloc_body(void** ptrs, size_rule r, unsigned long long n, unsigned long long id0,
                           block_source<Allocates> source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  void* p = source.take(t, size_of(r, id0 + t));
  if (p) *static_cast<unsigned*>(p) = static_cast<unsigned>(id0 + t + 1);
  ptrs[t] = p;
}

// Alloc-Cycle-Dealloc: `iters` allocations per thread, then frees all (when
// do_free), in one kernel. ptrs has n * iters slots.
template <bool Allocates>
__device__ void acd_body(void** ptrs, size_rule r, unsigned long long n, unsigned iters, int do_free,
                         unsigned long long* bad, block_source<Allocates> source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  for (unsigned i = 0; i < iters; ++i) {
    unsigned long long id = t * iters + i;
    void* p = source.take(id, size_of(r, id));
    if (p) *static_cast<unsigned*>(p) = static_cast<unsigned>(id + 1);
    ptrs[id] = p;
  }
  if (!do_free) return;
  unsigned long long wrong = 0;
  for (unsigned i = 0; i < iters; ++i) {
    unsigned long long id = t * iters + i;
    void* p = ptrs[id];
    if (!p || *static_cast<unsigned*>(p) != static_cast<unsigned>(id + 1)) ++wrong;
    source.give_back(p);
  }
  if (wrong) atomicAdd(bad, wrong);
}

// Probability test, one launch: a thread holding nothing allocates with
// p = 0.75, a thread holding memory frees it with p = 0.75. The size of a
// live allocation is kept in sizes[] for the check.
template <bool Allocates>
__device__ void prob_body(void** ptrs, unsigned* sizes, size_rule r, unsigned long long n, unsigned launch,
                          unsigned long long* nulls, block_source<Allocates> source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  unsigned coin = hash32(static_cast<unsigned>(t) * 0x01000193u ^ hash32(launch * 0x85ebca6bu + r.seed));
  void* p = ptrs[t];
  if (p == nullptr) {
    if (coin % 4 != 0) {
      unsigned long long sz = size_of(r, t + (static_cast<unsigned long long>(launch) << 32));
      p = source.take(t, sz);
      if (p) {
        *static_cast<unsigned*>(p) = static_cast<unsigned>(t + 1);
        sizes[t] = static_cast<unsigned>(sz);
      } else {
        atomicAdd(nulls, 1ull);
      }
      ptrs[t] = p;
    }
  } else if (coin % 4 != 0) {
    source.give_back(p);
    ptrs[t] = nullptr;
  }
}

// The timed kernels: each measured one and its no-allocation baseline share
// a body, so they differ only in where blocks come from.
__global__ void k_alloc(void** ptrs, size_rule r, unsigned long long n, unsigned long long id0) {
  alloc_body<true>(ptrs, r, n, id0, {});
}

__global__ void k_alloc_none(void** ptrs, size_rule r, unsigned long long n, unsigned long long id0, char* base,
                             unsigned long long stride) {
  alloc_body<false>(ptrs, r, n, id0, {base, stride});
}

__global__ void k_free(void** ptrs, unsigned long long n) {
  unsigned long long t = gtid();
  if (t >= n) return;
  free(ptrs[t]);
}

__global__ void k_free_none(void** ptrs, unsigned long long n) {
  unsigned long long t = gtid();
  if (t >= n) return;
  if (ptrs[t] == reinterpret_cast<void*>(1)) ptrs[t] = nullptr;  // a load the compiler must keep
}

__global__ void k_acd(void** ptrs, size_rule r, unsigned long long n, unsigned iters, int do_free,
                      unsigned long long* bad) {
  acd_body<true>(ptrs, r, n, iters, do_free, bad, {});
}

__global__ void k_acd_none(void** ptrs, size_rule r, unsigned long long n, unsigned iters, int do_free,
                           unsigned long long* bad, char* base, unsigned long long stride) {
  acd_body<false>(ptrs, r, n, iters, do_free, bad, {base, stride});
}

__global__ void k_prob(void** ptrs, unsigned* sizes, size_rule r, unsigned long long n, unsigned launch,
                       unsigned long long* nulls) {
  prob_body<true>(ptrs, sizes, r, n, launch, nulls, {});
}

__global__ void k_prob_none(void** ptrs, unsigned* sizes, size_rule r, unsigned long long n, unsigned launch,
                            unsigned long long* nulls, char* base, unsigned long long stride) {
  prob_body<false>(ptrs, sizes, r, n, launch, nulls, {base, stride});
}

// ---- verification (never timed) ------------------------------------------

// The size of allocation i: from sizes[] when given, else from the rule.
__device__ inline unsigned long long size_at(const unsigned* sizes, size_rule r, unsigned long long i,
                                             unsigned long long id0) {
  return sizes ? sizes[i] : size_of(r, id0 + i);
}

__global__ void k_fill(void** ptrs, const unsigned* sizes, size_rule r, unsigned long long n, unsigned long long id0) {
  unsigned long long t = gtid();
  if (t >= n) return;
  char* p = static_cast<char*>(ptrs[t]);
  if (!p || (reinterpret_cast<unsigned long long>(p) & 3)) return;
  unsigned long long sz = size_at(sizes, r, t, id0);
  unsigned v = static_cast<unsigned>(id0 + t + 1);
  unsigned long long i = 0;
  if ((reinterpret_cast<unsigned long long>(p) & 15) == 0)
    for (; i + 16 <= sz; i += 16) *reinterpret_cast<uint4*>(p + i) = make_uint4(v, v, v, v);
  for (; i + 4 <= sz; i += 4) *reinterpret_cast<unsigned*>(p + i) = v;
}

__global__ void k_check(void** ptrs, const unsigned* sizes, size_rule r, unsigned long long n, unsigned long long id0,
                        check_result* out) {
  unsigned long long t = gtid();
  if (t >= n) return;
  char* p = static_cast<char*>(ptrs[t]);
  if (!p) {
    atomicAdd(&out->nulls, 1ull);
    return;
  }
  unsigned long long a = reinterpret_cast<unsigned long long>(p);
  unsigned long long sz = size_at(sizes, r, t, id0);
  atomicAdd(&out->checked, 1ull);
  atomicAdd(&out->requested, sz);
  atomicMin(&out->lowest, a);
  atomicMax(&out->highest_end, a + sz);
  if (a & 15) {
    atomicAdd(&out->misaligned, 1ull);
    if (a & 3) return;
  }
  unsigned v = static_cast<unsigned>(id0 + t + 1);
  bool ok = true;
  unsigned long long i = 0;
  if ((a & 15) == 0)
    for (; i + 16 <= sz && ok; i += 16) {
      uint4 w = *reinterpret_cast<const uint4*>(p + i);
      ok = w.x == v && w.y == v && w.z == v && w.w == v;
    }
  for (; i + 4 <= sz && ok; i += 4) ok = *reinterpret_cast<const unsigned*>(p + i) == v;
  if (!ok) atomicAdd(&out->corrupt, 1ull);
}

__global__ void k_count_nulls(void* const* ptrs, unsigned long long n, unsigned long long* nulls) {
  unsigned long long t = gtid();
  if (t >= n) return;
  if (!ptrs[t]) atomicAdd(nulls, 1ull);
}

__global__ void k_alloc_one(void** out) { *out = malloc(16); }
__global__ void k_free_one(void** in) { free(*in); }

// ---- host side -------------------------------------------------------------

unsigned grid(unsigned long long n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

struct point {
  unsigned long long lo = 16, hi = 0, threads = 1, iters = 1;
  std::string text;
};

point parse_point(const std::string& s) {
  point p;
  p.text = s;
  auto parts = bench::split(s, 'x');
  if (parts.empty() || parts.size() > 3) bench::fatal("bad point '%s' (SIZE[-MAX]xTHREADS[xITERS])", s.c_str());
  auto sizes = bench::split(parts[0], '-');
  p.lo = std::strtoull(sizes.at(0).c_str(), nullptr, 0);
  if (sizes.size() > 1) p.hi = std::strtoull(sizes[1].c_str(), nullptr, 0);
  if (parts.size() > 1) p.threads = std::strtoull(parts[1].c_str(), nullptr, 0);
  if (parts.size() > 2) p.iters = std::strtoull(parts[2].c_str(), nullptr, 0);
  if (p.lo == 0 || p.lo % 4 || (p.hi && p.hi % 4) || p.threads == 0 || p.iters == 0)
    bench::fatal("bad point '%s': sizes must be positive multiples of 4", s.c_str());
  return p;
}

template <class T>
struct dbuf {
  T* p = nullptr;
  explicit dbuf(size_t n) {
    if (n) BENCH_CUDA(cudaMalloc(&p, n * sizeof(T)));
  }
  ~dbuf() {
    if (p) cudaFree(p);
  }
  dbuf(const dbuf&) = delete;
  dbuf& operator=(const dbuf&) = delete;
};

struct context {
  bench::host_api api;
  std::string test, mode;
  bool baseline = false, reset_mode = false;
  bool reset_each = false;  // warm mode, but reset between reps (strategies that never reuse memory)
  int reps = 5, warmup = 1;
  double budget_ms = 60e3;
  unsigned seed = 1;
};

// Verification of n pointers: fill, then check. Returns the counters.
check_result verify(void** ptrs, const unsigned* sizes, size_rule r, unsigned long long n, unsigned long long id0) {
  dbuf<check_result> d(1);
  check_result init{0, 0, 0, 0, ~0ull, 0, 0};
  BENCH_CUDA(cudaMemcpy(d.p, &init, sizeof init, cudaMemcpyHostToDevice));
  k_fill<<<grid(n), kBlock>>>(ptrs, sizes, r, n, id0);
  BENCH_CUDA(cudaGetLastError());
  k_check<<<grid(n), kBlock>>>(ptrs, sizes, r, n, id0, d.p);
  BENCH_CUDA(cudaGetLastError());
  check_result h;
  BENCH_CUDA(cudaMemcpy(&h, d.p, sizeof h, cudaMemcpyDeviceToHost));
  return h;
}

std::string describe(const check_result& c) {
  char b[160];
  std::snprintf(b, sizeof b, "nulls=%llu misaligned=%llu corrupt=%llu", c.nulls, c.misaligned, c.corrupt);
  return b;
}

bool failed(const check_result& c) { return c.nulls || c.misaligned || c.corrupt; }

unsigned long long slot_stride(const point& p) {
  unsigned long long m = p.hi ? p.hi : p.lo;
  return (m + 15) / 16 * 16;
}

// Fills in mode, reset note and the identification fields of a row.
bench::row make_row(const context& c, const point& p, const char* phase) {
  bench::row r;
  r.test = c.test;
  r.mode = c.mode;
  r.phase = phase;
  r.size = p.lo;
  r.size_max = p.hi;
  r.threads = p.threads;
  r.iters = p.iters;
  return r;
}

// Emits one timed row: the medians of `times` and what failed.
void emit_times(const context& c, const point& p, const char* phase, const std::vector<double>& times, int failures,
                const std::string& note) {
  bench::row row = make_row(c, p, phase);
  row.s = bench::summarize(times);
  row.failures = failures;
  row.note = note;
  bench::emit(row);
}

void reset_if(const context& c) {
  if (c.baseline) return;
  if (c.reset_mode || (c.reset_each && c.api.reset))
    if (!c.api.do_reset()) bench::fatal("gpualloc_reset failed");
}

// single / mixed / scaling: malloc kernel, verification, free kernel.
void run_alloc_free(const context& c, const point& p) {
  const unsigned long long n = p.threads;
  size_rule r{p.lo, p.hi, c.seed};
  dbuf<void*> ptrs(n);
  dbuf<char> slots(c.baseline ? n * slot_stride(p) : 0);
  std::vector<double> ta, tf, range;
  int fails = 0;
  check_result worst{};
  unsigned long long requested = 0;
  bench::event_timer ev;
  auto t0 = std::chrono::steady_clock::now();
  int warm = c.warmup;  // reset mode too: a warm GPU (TLB, caches, clocks), a fresh heap
  for (int rep = -warm; rep < c.reps; ++rep) {
    reset_if(c);
    ev.start();
    if (c.baseline)
      k_alloc_none<<<grid(n), kBlock>>>(ptrs.p, r, n, 0, slots.p, slot_stride(p));
    else
      k_alloc<<<grid(n), kBlock>>>(ptrs.p, r, n, 0);
    double a = ev.stop();
    check_result chk = verify(ptrs.p, nullptr, r, n, 0);
    ev.start();
    if (c.baseline)
      k_free_none<<<grid(n), kBlock>>>(ptrs.p, n);
    else
      k_free<<<grid(n), kBlock>>>(ptrs.p, n);
    double f = ev.stop();
    if (rep < 0) continue;
    ta.push_back(a);
    tf.push_back(f);
    if (chk.checked) range.push_back(static_cast<double>(chk.highest_end - chk.lowest));
    requested = chk.requested;
    if (failed(chk)) {
      ++fails;
      worst.nulls = std::max(worst.nulls, chk.nulls);
      worst.misaligned = std::max(worst.misaligned, chk.misaligned);
      worst.corrupt = std::max(worst.corrupt, chk.corrupt);
    }
    if (bench::wall_ms_since(t0) > c.budget_ms && rep + 1 < c.reps) break;
  }
  std::string note = fails ? "worst rep: " + describe(worst) : "";
  if (static_cast<int>(ta.size()) < c.reps) note += (note.empty() ? "" : " ") + std::string("reps cut by time budget");
  emit_times(c, p, "alloc", ta, fails, note);
  emit_times(c, p, "free", tf, fails, note);
  if (c.test != "scaling" && !c.baseline) {  // fragmentation: address range of the live set
    bench::row rr = make_row(c, p, c.test.c_str());
    rr.test = "frag";
    rr.metric = "range";
    rr.unit = "B";
    rr.s = bench::summarize(range);
    rr.failures = fails;
    rr.note = "requested=" + std::to_string(requested) + (note.empty() ? "" : " " + note);
    bench::emit(rr);
  }
}

// Alloc-Cycle-Dealloc.
void run_acd(const context& c, const point& p) {
  const unsigned long long n = p.threads, total = n * p.iters;
  size_rule r{p.lo, p.hi, c.seed};
  dbuf<void*> ptrs(total);
  dbuf<char> slots(c.baseline ? total * slot_stride(p) : 0);
  dbuf<unsigned long long> bad(1);
  std::vector<double> t;
  int fails = 0;
  std::string worst;
  bench::event_timer ev;
  auto t0 = std::chrono::steady_clock::now();
  int warm = c.warmup;  // reset mode too: a warm GPU (TLB, caches, clocks), a fresh heap
  auto launch = [&](int do_free) {
    if (c.baseline)
      k_acd_none<<<grid(n), kBlock>>>(ptrs.p, r, n, static_cast<unsigned>(p.iters), do_free, bad.p, slots.p,
                                      slot_stride(p));
    else
      k_acd<<<grid(n), kBlock>>>(ptrs.p, r, n, static_cast<unsigned>(p.iters), do_free, bad.p);
  };
  for (int rep = -warm; rep < c.reps; ++rep) {
    reset_if(c);
    BENCH_CUDA(cudaMemset(bad.p, 0, sizeof(unsigned long long)));
    ev.start();
    launch(1);
    double ms = ev.stop();
    unsigned long long hb = 0;
    BENCH_CUDA(cudaMemcpy(&hb, bad.p, sizeof hb, cudaMemcpyDeviceToHost));
    // Verification pass: the same allocations kept alive, filled and checked.
    launch(0);
    BENCH_CUDA(cudaDeviceSynchronize());
    check_result chk = verify(ptrs.p, nullptr, r, total, 0);
    if (c.baseline)
      k_free_none<<<grid(total), kBlock>>>(ptrs.p, total);
    else
      k_free<<<grid(total), kBlock>>>(ptrs.p, total);
    BENCH_CUDA(cudaDeviceSynchronize());
    if (rep < 0) continue;
    t.push_back(ms);
    if (hb || failed(chk)) {
      ++fails;
      worst = describe(chk) + " in-kernel-mismatch=" + std::to_string(hb);
    }
    if (bench::wall_ms_since(t0) > c.budget_ms && rep + 1 < c.reps) break;
  }
  emit_times(c, p, "cycle", t, fails, worst);
}

// Probability test: `iters` launches from an empty state, summed.
void run_prob(const context& c, const point& p) {
  const unsigned long long n = p.threads;
  size_rule r{p.lo, p.hi, c.seed};
  dbuf<void*> ptrs(n);
  dbuf<unsigned> sizes(n);
  dbuf<char> slots(c.baseline ? n * slot_stride(p) : 0);
  dbuf<unsigned long long> nulls(1);
  std::vector<double> t;
  int fails = 0;
  std::string worst;
  bench::event_timer ev;
  auto t0 = std::chrono::steady_clock::now();
  int warm = c.warmup;  // reset mode too: a warm GPU (TLB, caches, clocks), a fresh heap
  for (int rep = -warm; rep < c.reps; ++rep) {
    reset_if(c);
    BENCH_CUDA(cudaMemset(ptrs.p, 0, n * sizeof(void*)));
    BENCH_CUDA(cudaMemset(nulls.p, 0, sizeof(unsigned long long)));
    double sum = 0;
    check_result acc{};
    for (unsigned k = 0; k < p.iters; ++k) {
      ev.start();
      if (c.baseline)
        k_prob_none<<<grid(n), kBlock>>>(ptrs.p, sizes.p, r, n, k + 1000u * (rep + warm), nulls.p, slots.p,
                                         slot_stride(p));
      else
        k_prob<<<grid(n), kBlock>>>(ptrs.p, sizes.p, r, n, k + 1000u * (rep + warm), nulls.p);
      sum += ev.stop();
      check_result chk = verify(ptrs.p, sizes.p, r, n, 0);  // NULL here means "holds nothing"
      acc.misaligned += chk.misaligned;
      acc.corrupt += chk.corrupt;
    }
    BENCH_CUDA(cudaMemcpy(&acc.nulls, nulls.p, sizeof acc.nulls, cudaMemcpyDeviceToHost));
    if (c.baseline)
      k_free_none<<<grid(n), kBlock>>>(ptrs.p, n);
    else
      k_free<<<grid(n), kBlock>>>(ptrs.p, n);
    BENCH_CUDA(cudaDeviceSynchronize());
    if (rep < 0) continue;
    t.push_back(sum);
    if (failed(acc)) {
      ++fails;
      worst = describe(acc);
    }
    if (bench::wall_ms_since(t0) > c.budget_ms && rep + 1 < c.reps) break;
  }
  emit_times(c, p, "total", t, fails, worst);
}

// Utilization: batches of `threads` allocations of the point's size, kept
// alive, until a batch sees a NULL. Then everything is verified and freed,
// and one batch is allocated again to see the memory come back.
void run_oom(const context& c, const point& p) {
  if (c.baseline) return;
  if (c.api.reset && !c.api.do_reset()) bench::fatal("gpualloc_reset failed");
  const unsigned long long batch = p.threads;
  size_rule r{p.lo, p.hi, c.seed};
  const unsigned long long heap = c.api.heap();
  const unsigned long long avg = p.hi ? (p.lo + p.hi) / 2 : p.lo;
  // Room for 5% more than the heap could hold: an allocator that never fails
  // (or overcommits) stops there and fails the overlap check.
  unsigned long long max_batches = (heap ? heap / avg * 21 / 20 / batch : 1000) + 2;
  dbuf<void*> ptrs(max_batches * batch);
  dbuf<unsigned long long> nulls(1);
  BENCH_CUDA(cudaMemset(ptrs.p, 0, max_batches * batch * sizeof(void*)));
  bench::event_timer ev;
  auto t0 = std::chrono::steady_clock::now();
  double alloc_ms = 0;
  unsigned long long b = 0, hn = 0;
  bool budget_hit = false;
  for (; b < max_batches; ++b) {
    BENCH_CUDA(cudaMemset(nulls.p, 0, sizeof(unsigned long long)));
    ev.start();
    k_alloc<<<grid(batch), kBlock>>>(ptrs.p + b * batch, r, batch, b * batch);
    alloc_ms += ev.stop();
    k_count_nulls<<<grid(batch), kBlock>>>(ptrs.p + b * batch, batch, nulls.p);
    BENCH_CUDA(cudaMemcpy(&hn, nulls.p, sizeof hn, cudaMemcpyDeviceToHost));
    if (hn) {
      ++b;
      break;
    }
    if (bench::wall_ms_since(t0) > c.budget_ms) {
      budget_hit = true;
      ++b;
      break;
    }
  }
  const unsigned long long total = b * batch;
  check_result chk = verify(ptrs.p, nullptr, r, total, 0);
  k_free<<<grid(total), kBlock>>>(ptrs.p, total);
  BENCH_CUDA(cudaDeviceSynchronize());
  // Memory back after the frees?
  k_alloc<<<grid(batch), kBlock>>>(ptrs.p, r, batch, 0);
  BENCH_CUDA(cudaMemset(nulls.p, 0, sizeof(unsigned long long)));
  k_count_nulls<<<grid(batch), kBlock>>>(ptrs.p, batch, nulls.p);
  unsigned long long again = 0;
  BENCH_CUDA(cudaMemcpy(&again, nulls.p, sizeof again, cudaMemcpyDeviceToHost));
  k_free<<<grid(batch), kBlock>>>(ptrs.p, batch);
  BENCH_CUDA(cudaDeviceSynchronize());

  const unsigned long long ok = chk.checked;
  bool overlap = chk.corrupt || chk.misaligned;
  char note[256];
  std::snprintf(note, sizeof note, "allocs=%llu heap=%llu batches=%llu %s realloc_after_free_nulls=%llu/%llu%s%s", ok,
                heap, b, describe(chk).c_str(), again, batch, hn ? "" : " never_failed",
                budget_hit ? " stopped_by_time_budget" : "");
  bench::row u = make_row(c, p, "util");
  u.mode = "reset";
  u.metric = "utilization";
  u.unit = "fraction";
  u.s = bench::summarize({heap ? static_cast<double>(chk.requested) / heap : std::nan("")});
  // No NULL at all within 105% of the heap is a failure too (unless the time
  // budget ended the test first: then the utilization is a lower bound).
  u.failures = (overlap || (!hn && !budget_hit)) ? 1 : 0;
  u.note = note;
  bench::emit(u);
  bench::row tm = make_row(c, p, "alloc_total");
  tm.mode = "reset";
  tm.s = bench::summarize({alloc_ms});
  tm.failures = u.failures;
  bench::emit(tm);
}

// Initialisation: context, first launch (module load + heap set-up), reset.
void run_init(const context& c) {
  point p;
  p.text = "init";
  auto t0 = std::chrono::steady_clock::now();
  BENCH_CUDA(cudaFree(nullptr));
  double ctx = bench::wall_ms_since(t0);
  dbuf<void*> slot(1);
  dbuf<char> s(16);
  t0 = std::chrono::steady_clock::now();
  if (c.baseline) {
    k_alloc_none<<<1, 1>>>(slot.p, size_rule{16, 0, 0}, 1, 0, s.p, 16);
    BENCH_CUDA(cudaDeviceSynchronize());
  } else {
    k_alloc_one<<<1, 1>>>(slot.p);
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  double first = bench::wall_ms_since(t0);
  if (!c.baseline) {
    k_free_one<<<1, 1>>>(slot.p);
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  bench::row rc = make_row(c, p, "context");
  rc.mode = "cold";
  rc.size = 0;
  rc.s = bench::summarize({ctx});
  rc.note = "cudaFree(0) wall time";
  bench::emit(rc);
  bench::row rl = make_row(c, p, "first_launch");
  rl.mode = "cold";
  rl.size = 0;
  rl.s = bench::summarize({first});
  rl.note = "wall time of the first kernel (1 thread; malloc+store)";
  bench::emit(rl);
  if (c.baseline) return;
  bench::row rr = make_row(c, p, "reset");
  rr.mode = "reset";
  rr.size = 0;
  if (!c.api.reset) {
    rr.s = bench::summarize({});
    rr.note = "gpualloc_reset not available";
  } else {
    std::vector<double> t;
    for (int i = 0; i < std::max(c.reps, 1); ++i) {
      auto t1 = std::chrono::steady_clock::now();
      if (!c.api.do_reset()) {
        ++rr.failures;
        continue;
      }
      t.push_back(bench::wall_ms_since(t1));
    }
    rr.s = bench::summarize(t);
    rr.iters = c.reps;
    char b[96];
    std::snprintf(b, sizeof b, "gpualloc_reset() wall time incl. sync; heap=%llu", c.api.heap());
    rr.note = b;
  }
  bench::emit(rr);
}

template <class K>
void emit_regs(const context& c, const char* name, K kernel) {
  cudaFuncAttributes a{};
  BENCH_CUDA(cudaFuncGetAttributes(&a, kernel));
  point p;
  bench::row r = make_row(c, p, name);
  r.mode = "runtime";
  r.size = 0;
  r.threads = 0;
  r.iters = 0;
  r.metric = "registers";
  r.unit = "regs";
  r.s = bench::summarize({static_cast<double>(a.numRegs)});
  bench::emit(r);
  r.metric = "local";
  r.unit = "B";
  r.s = bench::summarize({static_cast<double>(a.localSizeBytes)});
  bench::emit(r);
}

void run_regs(const context& c) {
  if (c.baseline) {
    emit_regs(c, "alloc", k_alloc_none);
    emit_regs(c, "free", k_free_none);
    emit_regs(c, "acd", k_acd_none);
    emit_regs(c, "prob", k_prob_none);
  } else {
    emit_regs(c, "alloc", k_alloc);
    emit_regs(c, "free", k_free);
    emit_regs(c, "acd", k_acd);
    emit_regs(c, "prob", k_prob);
  }
}

void usage() {
  std::printf(
      "usage: gpualloc-bench-alloc --test single|mixed|scaling|acd|prob|oom|init|regs\n"
      "         [--points SIZE[-MAX]xTHREADS[xITERS],...] [--mode warm|reset] [--reps N]\n"
      "         [--warmup N] [--budget-s SECONDS] [--seed N] [--baseline] [--reset-each-rep]\n"
      "Prints ROW,%s lines. Normally run by bench/gpualloc-bench.\n",
      bench::kRowHeader);
}

}  // namespace

int main(int argc, char** argv) {
  bench::args a{argc, argv};
  if (a.flag("--help") || a.flag("-h") || !a.get("--test")) {
    usage();
    return a.get("--test") || a.flag("--help") || a.flag("-h") ? 0 : 2;
  }
  context c;
  c.test = a.get("--test");
  c.mode = a.get("--mode", "warm");
  c.baseline = a.flag("--baseline");
  c.reps = static_cast<int>(a.num("--reps", 5));
  c.warmup = static_cast<int>(a.num("--warmup", 1));
  c.budget_ms = a.real("--budget-s", 60) * 1e3;
  c.seed = static_cast<unsigned>(a.num("--seed", 1));
  c.reset_each = a.flag("--reset-each-rep");
  if (c.mode != "warm" && c.mode != "reset") bench::fatal("--mode must be warm or reset");

  if (c.test == "init") {  // before anything touches the context
    c.api = bench::host_api::find();
    run_init(c);
    bench::print_info(c.api);
    return 0;
  }
  BENCH_CUDA(cudaFree(nullptr));
  c.api = bench::host_api::find();
  bench::print_info(c.api);
  c.reset_mode = c.mode == "reset";
  if (c.reset_mode && !c.baseline && !c.api.reset)
    bench::fatal("--mode reset needs gpualloc_reset (libgpualloc not loaded?)");

  if (c.test == "regs") {
    run_regs(c);
    return 0;
  }
  // Load the module and let libgpualloc set up the heap before any timing.
  if (!c.baseline) {
    dbuf<void*> slot(1);
    k_alloc_one<<<1, 1>>>(slot.p);
    k_free_one<<<1, 1>>>(slot.p);
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  const char* pts = a.get("--points");
  if (!pts) bench::fatal("--points is required for --test %s", c.test.c_str());
  for (const std::string& s : bench::split(pts, ',')) {
    point p = parse_point(s);
    bench::begin_point(s.c_str());
    if (c.test == "single" || c.test == "mixed" || c.test == "scaling")
      run_alloc_free(c, p);
    else if (c.test == "acd")
      run_acd(c, p);
    else if (c.test == "prob")
      run_prob(c, p);
    else if (c.test == "oom")
      run_oom(c, p);
    else
      bench::fatal("unknown test '%s'", c.test.c_str());
  }
  std::printf("DONE\n");
  return 0;
}
