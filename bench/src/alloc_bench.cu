// gpualloc-bench-alloc: the allocation tests of the survey benchmark (Winter
// et al., as scaled by Gallatin) and of Vinkler & Havran, as unmodified CUDA.
// Device code calls plain malloc/free; compiled with gpualloc-clang++ these
// become the strategy chosen by GPUALLOC_STRATEGY.
//
//   gpualloc-bench-alloc --test T --points P1,P2,... [--mode warm|reset]
//                        [--reps N] [--min-reps N] [--warmup N] [--budget-s S]
//                        [--hard-limit-s S] [--baseline none|bump] [--reset-each-rep]
//
// Tests (the driver bench/gpualloc-bench chooses the points):
//   single   one size per point, a kernel argument (the compiler sees it
//            uniform): malloc kernel, then free kernel (times both); also
//            reports the address range of the live allocations (frag)
//   mixed    sizes drawn per thread from the powers of two in [lo, hi]
//   scaling  as single, the driver varies the thread count
//   coalesce the three ways a warp's requests reach the allocator, each timed:
//            alloc-uniform (size a kernel argument, as single), alloc-loaded
//            (the same size, but loaded from memory per thread: the compiler
//            cannot prove it uniform), alloc-mixed (as mixed); rows are
//            labelled mode on/off by GPUALLOC_COALESCE (0: off)
//   acd      Alloc-Cycle-Dealloc: each thread allocates `iters` times, then
//            frees all, inside one kernel
//   prob     Probability test: `iters` launches; a thread without memory
//            allocates with p = 0.75, one with memory frees with p = 0.75
//   oom      utilization: batches of 100,000 allocations until the first NULL
//   churn    utilization under churn: slots filled to PERCENT % of the heap,
//            then ROUNDS rounds in which each slot, with p = 1/4, frees its
//            block and allocates a new one (live count constant), until the
//            first round with a NULL
//   growth   Ouroboros' growth test: iterations in which THREADS threads
//            allocate and half of the blocks are freed again, until the first
//            NULL; the live set's address range after each iteration
//   init     context creation, first launch, and gpualloc_reset() time
//   regs     registers and local memory of every kernel
//
// A point is  SIZE[-SIZEMAX]xTHREADS[xITERS], e.g. 16x1048576, 16-4096x1048576,
// 16x65536x10; for churn SIZE[-SIZEMAX]xPERCENTxROUNDS, e.g. 16-4096x90x200
// (the slot count follows from the heap); for growth SIZE[-SIZEMAX]xTHREADS,
// THREADS even (the iteration cap follows from the heap). --baseline none
// runs the same kernels with no allocation at all, --baseline bump with a
// hand-written warp-aggregated bump pointer (sources.h).
//
// Timing (timing.h): every timed kernel runs in a gated batch, so each event
// pair brackets one kernel already queued; a point takes up to --reps
// samples (at least --min-reps where the hard limit allows) within
// --budget-s; the row's `reps` is the number of samples behind its median.
// A heap that never reuses memory (--reset-each-rep) is reset before each
// batch, and a batch holds only as many samples as the heap can serve.
//
// Correctness: after each timed malloc kernel (untimed) every thread fills its
// whole allocation with its own id and a check kernel reads it back. Two
// overlapping live allocations cannot both keep their pattern, so overlap,
// NULL returns and misaligned pointers (< 16 B) count as failures.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common.h"
#include "sources.h"
#include "timing.h"

using bench::bump_source;
using bench::hash32;
using bench::heap_source;
using bench::packed_source;

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
//
// Templates over the block source (sources.h): the measured kernel
// (heap_source: plain malloc/free) and its baselines share each body.
// Region of a request (the baselines' buffer part): its warp, times the
// call's round where a thread calls more than once.

template <class Source>
__global__ void k_alloc_uniform(void** ptrs, unsigned long long size, unsigned long long n, Source source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  void* p = source.take_uniform(t / 32, size);
  if (p) *static_cast<unsigned*>(p) = static_cast<unsigned>(t + 1);
  ptrs[t] = p;
}

template <class Source>
__global__ void k_alloc_rule(void** ptrs, size_rule r, unsigned long long n, unsigned long long id0, Source source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  void* p = source.take(t / 32, size_of(r, id0 + t));
  if (p) *static_cast<unsigned*>(p) = static_cast<unsigned>(id0 + t + 1);
  ptrs[t] = p;
}

template <class Source>
__global__ void k_alloc_loaded(void** ptrs, const unsigned* sizes, unsigned long long n, Source source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  void* p = source.take(t / 32, sizes[t]);
  if (p) *static_cast<unsigned*>(p) = static_cast<unsigned>(t + 1);
  ptrs[t] = p;
}

template <class Source>
__global__ void k_free(void** ptrs, unsigned long long n, Source source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  void* p = ptrs[t];
  source.give_back(p);
  if (p == reinterpret_cast<void*>(1)) ptrs[t] = nullptr;  // a load the baselines must keep too
}

// Alloc-Cycle-Dealloc: `iters` allocations per thread, then frees all (when
// do_free), in one kernel. ptrs has n * iters slots.
template <class Source>
__global__ void k_acd(void** ptrs, size_rule r, unsigned long long n, unsigned iters, int do_free,
                      unsigned long long* bad, Source source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  for (unsigned i = 0; i < iters; ++i) {
    unsigned long long id = t * iters + i;
    void* p = source.take(t / 32 * iters + i, size_of(r, id));
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

// Probability test, one launch (number `launch` of the sample; `seed`
// varies per sample): a thread holding nothing allocates with p = 0.75, a
// thread holding memory frees it with p = 0.75. The size of a live
// allocation is kept in sizes[] for the check.
template <class Source>
__global__ void k_prob(void** ptrs, unsigned* sizes, size_rule r, unsigned long long n, unsigned launch, unsigned seed,
                       unsigned long long* nulls, Source source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  unsigned coin = hash32(static_cast<unsigned>(t) * 0x01000193u ^ hash32(seed * 0x85ebca6bu + r.seed));
  void* p = ptrs[t];
  if (p == nullptr) {
    if (coin % 4 != 0) {
      unsigned long long sz = size_of(r, t + (static_cast<unsigned long long>(seed) << 32));
      p = source.take(launch * ((n + 31) / 32) + t / 32, sz);
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

// Churn, one round over slots [first, first + n): an empty slot allocates; a
// full one, with p = 1/4 (a coin of seed, round and slot), frees its block
// and allocates a new one into the same slot, so the number of live blocks
// stays constant. The new size is drawn from the rule (id: round and slot)
// and kept in sizes[] for the check. A NULL leaves the slot empty (the next
// round retries it) and counts in *nulls. Round 0 over empty slots is the fill.
// `before`: the NULLs of the round before (nullptr: none); a round queued
// behind one that saw a NULL does nothing but pass that count on, so the
// rest of a gated batch costs no time (out-of-memory rounds can take seconds).
template <class Source>
__global__ void k_churn(void** ptrs, unsigned* sizes, size_rule r, unsigned long long first, unsigned long long n,
                        unsigned round, const unsigned long long* before, unsigned long long* nulls, Source source) {
  unsigned long long t = gtid();
  if (before != nullptr && *before != 0) {
    if (t == 0) *nulls = *before;
    return;
  }
  if (t >= n) return;
  const unsigned long long slot = first + t;
  void* p = ptrs[slot];
  if (p) {
    unsigned coin = hash32(static_cast<unsigned>(slot) * 0x01000193u ^ hash32(round * 0x85ebca6bu + r.seed));
    if (coin % 4 != 0) return;
    source.give_back(p);
  }
  unsigned long long sz = size_of(r, (static_cast<unsigned long long>(round) << 32) + slot);
  p = source.take(slot / 32, sz);
  if (p) {
    *static_cast<unsigned*>(p) = static_cast<unsigned>(slot + 1);
    sizes[slot] = static_cast<unsigned>(sz);
  } else {
    atomicAdd(nulls, 1ull);
  }
  ptrs[slot] = p;
}

// Growth, the allocations of one iteration (n threads, n even): thread t
// allocates a block; odd threads keep theirs in live[first + t / 2] (live
// until the end), even threads leave theirs in fresh[t / 2] for the
// iteration's free kernel (k_free over fresh), so the live set grows by n / 2
// blocks per iteration. Both blocks of a pair have the id first + t / 2 (their
// size; the value stored). A NULL counts in *nulls. As in k_churn, an
// iteration queued behind one that saw a NULL only passes that count on; it
// also empties fresh, so its free kernel frees nothing.
template <class Source>
__global__ void k_growth(void** live, void** fresh, size_rule r, unsigned long long first, unsigned long long n,
                         const unsigned long long* before, unsigned long long* nulls, Source source) {
  unsigned long long t = gtid();
  if (t >= n) return;
  if (*before != 0) {
    if (t == 0) *nulls = *before;
    if (t % 2 == 0) fresh[t / 2] = nullptr;
    return;
  }
  const unsigned long long id = first + t / 2;
  void* p = source.take(t / 32, size_of(r, id));
  if (p) *static_cast<unsigned*>(p) = static_cast<unsigned>(id + 1);
  else atomicAdd(nulls, 1ull);
  if (t % 2) live[id] = p;
  else fresh[t / 2] = p;
}

// ---- verification (never timed) ------------------------------------------

// The size of allocation i: from sizes[] when given, else from the rule.
__device__ inline unsigned long long size_at(const unsigned* sizes, size_rule r, unsigned long long i,
                                             unsigned long long id0) {
  return sizes ? sizes[i] : size_of(r, id0 + i);
}

__global__ void k_check_init(check_result* out) { *out = check_result{0, 0, 0, 0, ~0ull, 0, 0}; }

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

// Growth: the extent of each iteration's kept blocks. Block b reduces live
// slots [b * kept, (b + 1) * kept) (iteration b + 1) into out[b]: lowest,
// highest_end and requested; NULL slots are skipped.
__global__ void k_iteration_extent(void* const* live, size_rule r, unsigned long long kept, check_result* out) {
  __shared__ unsigned long long lowest, highest_end, requested;
  if (threadIdx.x == 0) {
    lowest = ~0ull;
    highest_end = requested = 0;
  }
  __syncthreads();
  unsigned long long lo = ~0ull, hi = 0, bytes = 0;
  for (unsigned long long i = threadIdx.x; i < kept; i += blockDim.x) {
    const unsigned long long slot = blockIdx.x * kept + i;
    const unsigned long long a = reinterpret_cast<unsigned long long>(live[slot]);
    if (!a) continue;
    const unsigned long long sz = size_of(r, slot);
    lo = std::min(lo, a);
    hi = std::max(hi, a + sz);
    bytes += sz;
  }
  atomicMin(&lowest, lo);
  atomicMax(&highest_end, hi);
  atomicAdd(&requested, bytes);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = check_result{0, 0, 0, 0, lowest, highest_end, requested};
}

__global__ void k_count_nulls(void* const* ptrs, unsigned long long n, unsigned long long* nulls) {
  unsigned long long t = gtid();
  if (t >= n) return;
  if (!ptrs[t]) atomicAdd(nulls, 1ull);
}

__global__ void k_set_sizes(unsigned* sizes, unsigned long long n, unsigned size) {
  unsigned long long t = gtid();
  if (t < n) sizes[t] = size;
}

__global__ void k_alloc_one(void** out) { *out = malloc(16); }
__global__ void k_free_one(void** in) { free(*in); }

// ---- host side -------------------------------------------------------------

// Blocks for n threads; at least one (a launch over nothing is still valid).
unsigned grid(unsigned long long n) { return static_cast<unsigned>(std::max(1ull, (n + kBlock - 1) / kBlock)); }

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

enum class source_kind { heap, packed, bump };

struct context {
  bench::host_api api;
  std::string test, mode;
  source_kind source = source_kind::heap;
  bool reset_mode = false;
  bool never_reuses = false;  // --reset-each-rep: free gives nothing back, reset between batches
  bool coalescing = true;     // GPUALLOC_COALESCE is not 0
  bench::sample_limits limits;
  unsigned seed = 1;
  bool baseline() const { return source != source_kind::heap; }
};

// The largest block of a point, rounded to 16: the baselines' stride.
unsigned long long slot_stride(const point& p) { return bench::round16(p.hi ? p.hi : p.lo); }

// Bytes a heap hands out for `count` requests of the rule starting at id0.
unsigned long long rule_bytes(size_rule r, unsigned long long count, unsigned long long id0) {
  if (r.hi == 0) return count * bench::round16(r.lo);
  unsigned long long sum = 0;
  for (unsigned long long i = 0; i < count; ++i) sum += bench::round16(size_of(r, id0 + i));
  return sum;
}

// How many requests of the rule, ids 0, 1, ..., ask for `target` bytes (sizes
// as requested, as the utilization counts them).
unsigned long long requests_for(size_rule r, unsigned long long target) {
  if (r.hi == 0) return (target + r.lo - 1) / r.lo;
  unsigned long long n = 0;
  for (unsigned long long sum = 0; sum < target; ++n) sum += size_of(r, n);
  return n;
}

// The baselines' memory and a launcher that passes the right source to a
// kernel template. `regions` regions of 32 * stride bytes each.
class sources {
 public:
  sources(const context& c, unsigned long long regions, unsigned long long stride)
      : kind_(c.source), buffer_(c.baseline() ? regions * 32 * stride : 0), top_(kind_ == source_kind::bump ? 1 : 0) {
    packed_.base = buffer_.p;
    packed_.stride = stride;
    bump_.base = buffer_.p;
    bump_.capacity = regions * 32 * stride;
    bump_.top = top_.p;
    bump_.per_lane = !c.coalescing;
  }
  // Empties the bump pointer (in the stream, untimed: before the marks).
  void refill() const {
    if (kind_ == source_kind::bump) BENCH_CUDA(cudaMemsetAsync(top_.p, 0, sizeof(unsigned long long)));
  }
  // launch(source) with the source this run measures.
  template <class Launch>
  void with(Launch launch) const {
    switch (kind_) {
      case source_kind::heap: launch(heap_source{}); break;
      case source_kind::packed: launch(packed_); break;
      case source_kind::bump: launch(bump_); break;
    }
    BENCH_CUDA(cudaGetLastError());
  }

 private:
  source_kind kind_;
  dbuf<char> buffer_;
  dbuf<unsigned long long> top_;
  packed_source packed_;
  bump_source bump_;
};

// Enqueues the untimed fill and check of n pointers into *out.
void enqueue_verify(void** ptrs, const unsigned* sizes, size_rule r, unsigned long long n, unsigned long long id0,
                    check_result* out) {
  k_check_init<<<1, 1>>>(out);
  k_fill<<<grid(n), kBlock>>>(ptrs, sizes, r, n, id0);
  k_check<<<grid(n), kBlock>>>(ptrs, sizes, r, n, id0, out);
  BENCH_CUDA(cudaGetLastError());
}

check_result read_result(const check_result* d) {
  check_result h;
  BENCH_CUDA(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  return h;
}

std::string describe(const check_result& c) {
  char b[160];
  std::snprintf(b, sizeof b, "nulls=%llu misaligned=%llu corrupt=%llu", c.nulls, c.misaligned, c.corrupt);
  return b;
}

bool failed(const check_result& c) { return c.nulls || c.misaligned || c.corrupt; }

void keep_worst(check_result& worst, const check_result& c) {
  worst.nulls = std::max(worst.nulls, c.nulls);
  worst.misaligned = std::max(worst.misaligned, c.misaligned);
  worst.corrupt = std::max(worst.corrupt, c.corrupt);
}

// Fills in mode and the identification fields of a row.
bench::row make_row(const context& c, const point& p, const std::string& phase) {
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
void emit_times(const context& c, const point& p, const std::string& phase, const std::vector<double>& times,
                int failures, const std::string& note) {
  bench::row row = make_row(c, p, phase);
  row.s = bench::summarize(times);
  row.failures = failures;
  row.note = note;
  bench::emit(row);
}

std::string join_notes(const std::string& a, const std::string& b) { return a.empty() ? b : b.empty() ? a : a + " " + b; }

void reset_heap(const context& c) {
  if (!c.baseline() && !c.api.do_reset()) bench::fatal("gpualloc_reset failed");
}

// The batch hook of run_samples: resets where the mode asks for it, and
// caps a batch at what a heap that never reuses can serve between resets.
auto batch_policy(const context& c, unsigned long long bytes_per_sample) {
  return [&c, bytes_per_sample](int wanted) {
    if (c.baseline()) return wanted;
    if (c.reset_mode) {
      reset_heap(c);
      return 1;
    }
    if (!c.never_reuses || !c.api.reset) return wanted;
    reset_heap(c);
    const unsigned long long heap = c.api.heap();
    const unsigned long long fit = bytes_per_sample ? heap / 10 * 9 / bytes_per_sample : wanted;
    return static_cast<int>(std::max<unsigned long long>(1, std::min<unsigned long long>(fit, wanted)));
  };
}

// How a timed malloc kernel chooses sizes.
enum class entry { uniform, rule, loaded };

// single / mixed / scaling / coalesce: malloc kernel, verification, free kernel.
// Marks per sample: 0 | malloc | 1, verification, 2 | free | 3.
void run_alloc_free(const context& c, const point& p, entry how, const std::string& alloc_phase,
                    const std::string& free_phase, bool report_frag) {
  const unsigned long long n = p.threads;
  const size_rule r{p.lo, how == entry::rule ? p.hi : 0, c.seed};
  const int slots = c.limits.max_batch;
  dbuf<void*> ptrs(n);
  dbuf<unsigned> sizes(how == entry::loaded ? n : 0);
  dbuf<check_result> results(slots);
  if (how == entry::loaded) {
    k_set_sizes<<<grid(n), kBlock>>>(sizes.p, n, static_cast<unsigned>(p.lo));
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  const sources src(c, (n + 31) / 32, how == entry::rule ? slot_stride(p) : bench::round16(p.lo));
  std::vector<double> ta, tf, range;
  int fails = 0;
  check_result worst{};
  unsigned long long requested = 0;

  auto enqueue = [&](int slot, bench::marks& m, size_t at) {
    src.refill();
    m.at(at);
    src.with([&](auto s) {
      switch (how) {
        case entry::uniform: k_alloc_uniform<<<grid(n), kBlock>>>(ptrs.p, p.lo, n, s); break;
        case entry::rule: k_alloc_rule<<<grid(n), kBlock>>>(ptrs.p, r, n, 0, s); break;
        case entry::loaded: k_alloc_loaded<<<grid(n), kBlock>>>(ptrs.p, sizes.p, n, s); break;
      }
    });
    m.at(at + 1);
    enqueue_verify(ptrs.p, sizes.p, r, n, 0, results.p + slot);
    m.at(at + 2);
    src.with([&](auto s) { k_free<<<grid(n), kBlock>>>(ptrs.p, n, s); });
    m.at(at + 3);
  };
  auto collect = [&](int slot, bench::marks& m, size_t at) {
    ta.push_back(m.ms(at, at + 1));
    tf.push_back(m.ms(at + 2, at + 3));
    check_result chk = read_result(results.p + slot);
    if (chk.checked) range.push_back(static_cast<double>(chk.highest_end - chk.lowest));
    requested = chk.requested;
    if (failed(chk)) {
      ++fails;
      keep_worst(worst, chk);
    }
  };
  const unsigned long long bytes = c.never_reuses ? rule_bytes(r, n, 0) : 0;
  bench::sample_run run = bench::run_samples(c.limits, 4, batch_policy(c, bytes), enqueue, collect);
  std::string note = join_notes(fails ? "worst sample: " + describe(worst) : "", run.note());
  emit_times(c, p, alloc_phase, ta, fails, note);
  emit_times(c, p, free_phase, tf, fails, note);
  if (report_frag && !c.baseline()) {  // fragmentation: address range of the live set
    bench::row rr = make_row(c, p, c.test);
    rr.test = "frag";
    rr.metric = "range";
    rr.unit = "B";
    rr.s = bench::summarize(range);
    rr.failures = fails;
    rr.note = "requested=" + std::to_string(requested) + (note.empty() ? "" : " " + note);
    bench::emit(rr);
  }
}

// Alloc-Cycle-Dealloc. Marks per sample: 0 | acd kernel | 1; then, untimed,
// the same allocations kept alive, filled, checked and freed.
void run_acd(const context& c, const point& p) {
  const unsigned long long n = p.threads, total = n * p.iters;
  const size_rule r{p.lo, p.hi, c.seed};
  const int slots = c.limits.max_batch;
  dbuf<void*> ptrs(total);
  dbuf<unsigned long long> bad(slots);
  dbuf<check_result> results(slots);
  const sources src(c, (n + 31) / 32 * p.iters, slot_stride(p));
  std::vector<double> t;
  int fails = 0;
  std::string worst;
  const unsigned iters = static_cast<unsigned>(p.iters);

  auto enqueue = [&](int slot, bench::marks& m, size_t at) {
    BENCH_CUDA(cudaMemsetAsync(bad.p + slot, 0, sizeof(unsigned long long)));
    src.refill();
    m.at(at);
    src.with([&](auto s) { k_acd<<<grid(n), kBlock>>>(ptrs.p, r, n, iters, 1, bad.p + slot, s); });
    m.at(at + 1);
    src.refill();
    src.with([&](auto s) { k_acd<<<grid(n), kBlock>>>(ptrs.p, r, n, iters, 0, bad.p + slot, s); });
    enqueue_verify(ptrs.p, nullptr, r, total, 0, results.p + slot);
    src.with([&](auto s) { k_free<<<grid(total), kBlock>>>(ptrs.p, total, s); });
  };
  auto collect = [&](int slot, bench::marks& m, size_t at) {
    t.push_back(m.ms(at, at + 1));
    unsigned long long hb = 0;
    BENCH_CUDA(cudaMemcpy(&hb, bad.p + slot, sizeof hb, cudaMemcpyDeviceToHost));
    check_result chk = read_result(results.p + slot);
    if (hb || failed(chk)) {
      ++fails;
      worst = describe(chk) + " in-kernel-mismatch=" + std::to_string(hb);
    }
  };
  const unsigned long long bytes = c.never_reuses ? 2 * rule_bytes(r, total, 0) : 0;
  bench::sample_run run = bench::run_samples(c.limits, 2, batch_policy(c, bytes), enqueue, collect);
  emit_times(c, p, "cycle", t, fails, join_notes(worst, run.note()));
}

// Probability test: `iters` launches from an empty state, summed. Marks per
// sample: 2k | launch k | 2k+1, each launch followed by an untimed check.
void run_prob(const context& c, const point& p) {
  const unsigned long long n = p.threads;
  const unsigned iters = static_cast<unsigned>(p.iters);
  const size_rule r{p.lo, p.hi, c.seed};
  bench::sample_limits limits = c.limits;
  limits.max_batch = std::max(1, 256 / static_cast<int>(6 * iters + 3));  // ~6 commands per launch
  const int slots = limits.max_batch;
  dbuf<void*> ptrs(n);
  dbuf<unsigned> sizes(n);
  dbuf<unsigned long long> nulls(slots);
  dbuf<check_result> results(static_cast<size_t>(slots) * iters);
  const sources src(c, (n + 31) / 32 * iters, slot_stride(p));
  std::vector<double> t;
  int fails = 0;
  std::string worst;
  unsigned sample_seed = 0;  // every sample draws other coins

  auto enqueue = [&](int slot, bench::marks& m, size_t at) {
    BENCH_CUDA(cudaMemsetAsync(ptrs.p, 0, n * sizeof(void*)));
    BENCH_CUDA(cudaMemsetAsync(nulls.p + slot, 0, sizeof(unsigned long long)));
    src.refill();
    ++sample_seed;
    for (unsigned k = 0; k < iters; ++k) {
      m.at(at + 2 * k);
      src.with([&](auto s) {
        k_prob<<<grid(n), kBlock>>>(ptrs.p, sizes.p, r, n, k, k + 1000u * sample_seed, nulls.p + slot, s);
      });
      m.at(at + 2 * k + 1);
      enqueue_verify(ptrs.p, sizes.p, r, n, 0, results.p + static_cast<size_t>(slot) * iters + k);
    }
    src.with([&](auto s) { k_free<<<grid(n), kBlock>>>(ptrs.p, n, s); });
  };
  auto collect = [&](int slot, bench::marks& m, size_t at) {
    double sum = 0;
    check_result acc{};
    for (unsigned k = 0; k < iters; ++k) {
      sum += m.ms(at + 2 * k, at + 2 * k + 1);
      check_result chk = read_result(results.p + static_cast<size_t>(slot) * iters + k);  // NULL: holds nothing
      acc.misaligned += chk.misaligned;
      acc.corrupt += chk.corrupt;
    }
    BENCH_CUDA(cudaMemcpy(&acc.nulls, nulls.p + slot, sizeof acc.nulls, cudaMemcpyDeviceToHost));
    t.push_back(sum);
    if (failed(acc)) {
      ++fails;
      worst = describe(acc);
    }
  };
  // At most every thread allocating in every launch.
  const unsigned long long bytes = c.never_reuses ? iters * n * slot_stride(p) : 0;
  bench::sample_run run = bench::run_samples(limits, 2 * static_cast<int>(iters), batch_policy(c, bytes), enqueue,
                                             collect);
  emit_times(c, p, "total", t, fails, join_notes(worst, run.note()));
}

// Verification of n pointers, synchronously (sizes as enqueue_verify takes them).
check_result verify_now(void** ptrs, const unsigned* sizes, size_rule r, unsigned long long n, unsigned long long id0) {
  dbuf<check_result> d(1);
  enqueue_verify(ptrs, sizes, r, n, id0, d.p);
  return read_result(d.p);
}

// After everything was freed: allocates one batch of the rule into ptrs,
// returns its NULLs (the memory should be back) and frees it again.
unsigned long long nulls_after_free(void** ptrs, size_rule r, unsigned long long batch) {
  dbuf<unsigned long long> nulls(1);
  k_alloc_rule<<<grid(batch), kBlock>>>(ptrs, r, batch, 0, heap_source{});
  BENCH_CUDA(cudaMemset(nulls.p, 0, sizeof(unsigned long long)));
  k_count_nulls<<<grid(batch), kBlock>>>(ptrs, batch, nulls.p);
  unsigned long long again = 0;
  BENCH_CUDA(cudaMemcpy(&again, nulls.p, sizeof again, cudaMemcpyDeviceToHost));
  k_free<<<grid(batch), kBlock>>>(ptrs, batch, heap_source{});
  BENCH_CUDA(cudaDeviceSynchronize());
  return again;
}

// Utilization: batches of `threads` allocations of the point's size, kept
// alive, until a batch sees a NULL. Then everything is verified and freed,
// and one batch is allocated again to see the memory come back.
void run_oom(const context& c, const point& p) {
  if (c.baseline()) return;
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
    k_alloc_rule<<<grid(batch), kBlock>>>(ptrs.p + b * batch, r, batch, b * batch, heap_source{});
    alloc_ms += ev.stop();
    k_count_nulls<<<grid(batch), kBlock>>>(ptrs.p + b * batch, batch, nulls.p);
    BENCH_CUDA(cudaMemcpy(&hn, nulls.p, sizeof hn, cudaMemcpyDeviceToHost));
    if (hn) {
      ++b;
      break;
    }
    if (bench::wall_ms_since(t0) > c.limits.budget_ms) {
      budget_hit = true;
      ++b;
      break;
    }
  }
  const unsigned long long total = b * batch;
  check_result chk = verify_now(ptrs.p, nullptr, r, total, 0);
  k_free<<<grid(total), kBlock>>>(ptrs.p, total, heap_source{});
  BENCH_CUDA(cudaDeviceSynchronize());
  const unsigned long long again = nulls_after_free(ptrs.p, r, batch);

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

// What run_rounds reports.
struct rounds_run {
  unsigned ok = 0;                   // rounds without a NULL
  unsigned first_null = 0;           // the round of the first NULL (0: none)
  unsigned long long nulls_then = 0; // the NULLs of that round
  bool budget_hit = false;           // the time budget (from t0) ended the rounds
  bool gate_timed_out = false;
};

// Rounds 1..rounds of a test that runs until its first NULL (churn, growth),
// in gated batches (timing.h): the first batch holds one round, later ones as
// many as the time budget has room for (at most 32). enqueue(k, m, at)
// enqueues round k, recording its marks_per_round marks at m.at(at + i); the
// round counts its NULLs in nulls[k] (device memory) and does nothing but pass
// nulls[k - 1] on when that is not 0. collect(m, at) reads a round's times,
// for every round up to and including the first with a NULL. Every kernel of
// a round must have run before (lazy loading, see timing.h).
template <class Enqueue, class Collect>
rounds_run run_rounds(const context& c, std::chrono::steady_clock::time_point t0, unsigned rounds, int marks_per_round,
                      const unsigned long long* nulls, Enqueue enqueue, Collect collect) {
  constexpr int kMaxBatch = 32;
  bench::gate& g = bench::the_gate();
  bench::marks m(static_cast<size_t>(marks_per_round) * kMaxBatch);
  std::vector<unsigned long long> batch_nulls(kMaxBatch);
  rounds_run run;
  double per_round_ms = 0;
  for (unsigned next = 1; next <= rounds && !run.first_null;) {
    const double elapsed = bench::wall_ms_since(t0);
    if (elapsed > c.limits.budget_ms) {
      run.budget_hit = true;
      break;
    }
    int n = 1;
    if (next > 1) n = static_cast<int>(std::clamp((c.limits.budget_ms - elapsed) / std::max(per_round_ms, 1e-3), 1.0,
                                                  static_cast<double>(kMaxBatch)));
    n = static_cast<int>(std::min<unsigned>(n, rounds - next + 1));
    const auto s0 = std::chrono::steady_clock::now();
    g.close();
    for (int k = 0; k < n; ++k) enqueue(next + k, m, static_cast<size_t>(k) * marks_per_round);
    g.open();
    BENCH_CUDA(cudaDeviceSynchronize());
    BENCH_CUDA(cudaGetLastError());
    run.gate_timed_out |= g.timed_out();
    per_round_ms = bench::wall_ms_since(s0) / n;
    BENCH_CUDA(cudaMemcpy(batch_nulls.data(), nulls + next, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    for (int k = 0; k < n && !run.first_null; ++k) {
      collect(m, static_cast<size_t>(k) * marks_per_round);
      if (batch_nulls[k]) {
        run.first_null = next + k;
        run.nulls_then = batch_nulls[k];
      } else {
        ++run.ok;
      }
    }
    next += n;
  }
  return run;
}

// Utilization under churn. The point is SIZE[-MAX]xPERCENTxROUNDS: slots are
// filled (the churn kernel over empty slots, in batches) until the bytes
// requested reach PERCENT % of the heap, then ROUNDS rounds of the churn
// kernel run over all slots: the live count stays constant, the live bytes
// near PERCENT %. It stops at the first round with a NULL, or when the time
// budget is spent. Rounds run in gated batches (timing.h), each round timed;
// rounds queued behind the first NULL return at once (k_churn) and do not
// count. Then
// every live block is filled and checked, all are freed, and one batch is
// allocated again (as oom).
void run_churn(const context& c, const point& p) {
  if (c.baseline()) return;
  if (p.threads > 100) bench::fatal("churn point '%s': the live percentage is at most 100", p.text.c_str());
  if (c.api.reset && !c.api.do_reset()) bench::fatal("gpualloc_reset failed");
  const size_rule r{p.lo, p.hi, c.seed};
  const unsigned long long heap = c.api.heap();
  if (!heap) bench::fatal("churn: heap size unknown");
  const double live = p.threads / 100.0;
  const unsigned long long slots = requests_for(r, static_cast<unsigned long long>(live * heap));
  if (slots >> 32) bench::fatal("churn point '%s': %llu slots (at most 2^32)", p.text.c_str(), slots);
  const unsigned rounds = static_cast<unsigned>(p.iters);
  constexpr unsigned long long kFillBatch = 1 << 18;
  dbuf<void*> ptrs(slots);
  dbuf<unsigned> sizes(slots);
  dbuf<unsigned long long> nulls(rounds + 1);  // [0]: the fill, [k]: round k
  BENCH_CUDA(cudaMemset(ptrs.p, 0, slots * sizeof(void*)));
  BENCH_CUDA(cudaMemset(nulls.p, 0, (rounds + 1) * sizeof(unsigned long long)));
  const auto t0 = std::chrono::steady_clock::now();
  bool budget_hit = false;

  // Fill, a batch at a time, until the last slot or a NULL.
  unsigned long long fill_nulls = 0;
  for (unsigned long long first = 0; first < slots && !fill_nulls; first += kFillBatch) {
    if (bench::wall_ms_since(t0) > c.limits.budget_ms) {
      budget_hit = true;
      break;
    }
    const unsigned long long n = std::min(kFillBatch, slots - first);
    k_churn<<<grid(n), kBlock>>>(ptrs.p, sizes.p, r, first, n, 0, nullptr, nulls.p, heap_source{});
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaMemcpy(&fill_nulls, nulls.p, sizeof fill_nulls, cudaMemcpyDeviceToHost));
  }

  // Rounds (the fill has loaded k_churn, so a batch can wait behind the gate).
  // Marks per round: 0 | churn | 1.
  std::vector<double> round_ms;
  rounds_run run;
  if (!fill_nulls && !budget_hit) {
    run = run_rounds(
        c, t0, rounds, 2, nulls.p,
        [&](unsigned k, bench::marks& m, size_t at) {
          m.at(at);
          k_churn<<<grid(slots), kBlock>>>(ptrs.p, sizes.p, r, 0, slots, k, nulls.p + k - 1, nulls.p + k,
                                            heap_source{});
          m.at(at + 1);
        },
        [&](const bench::marks& m, size_t at) { round_ms.push_back(m.ms(at, at + 1)); });
    budget_hit = run.budget_hit;
  }

  const check_result chk = verify_now(ptrs.p, sizes.p, r, slots, 0);
  k_free<<<grid(slots), kBlock>>>(ptrs.p, slots, heap_source{});
  BENCH_CUDA(cudaDeviceSynchronize());
  const unsigned long long batch = std::min(kFillBatch, slots);
  const unsigned long long again = nulls_after_free(ptrs.p, r, batch);

  // outcome: held (every round without a NULL), null (first_null: fill or a
  // round), cut (the time budget ended it first).
  const bool null_seen = fill_nulls || run.first_null;
  const char* outcome = null_seen ? "null" : budget_hit ? "cut" : "held";
  std::string null_at;  // where the first NULL came, and how many that round (or the fill) saw
  if (fill_nulls) null_at = " first_null=fill nulls_then=" + std::to_string(fill_nulls);
  else if (run.first_null)
    null_at = " first_null=" + std::to_string(run.first_null) + " nulls_then=" + std::to_string(run.nulls_then);
  char note[320];
  std::snprintf(note, sizeof note,
                "outcome=%s%s slots=%llu rounds=%u/%u live_end=%.4f heap=%llu %s realloc_after_free_nulls=%llu/%llu%s",
                outcome, null_at.c_str(), slots, run.ok, rounds, static_cast<double>(chk.requested) / heap, heap,
                describe(chk).c_str(), again, batch, budget_hit ? " stopped_by_time_budget" : "");
  const int failures = chk.corrupt || chk.misaligned ? 1 : 0;
  bench::row u = make_row(c, p, "util");
  u.metric = "churn";
  u.unit = "fraction";
  u.s = bench::summarize(null_seen || budget_hit ? std::vector<double>{} : std::vector<double>{live});
  u.failures = failures;
  u.note = note;
  bench::emit(u);
  bench::row rd = make_row(c, p, "util");
  rd.metric = "rounds";
  rd.unit = "rounds";
  rd.s = bench::summarize({static_cast<double>(run.ok)});
  rd.failures = failures;
  rd.note = std::string("outcome=") + outcome;
  bench::emit(rd);
  bench::row tm = make_row(c, p, "round");
  tm.s = bench::summarize(round_ms);
  tm.failures = failures;
  tm.note = run.gate_timed_out ? "gate timed out (times may include launch gaps)" : "";
  bench::emit(tm);
}

// Growth (Ouroboros, section 6.1.3, Fig. 3 bottom right). The point is
// SIZE[-MAX]xTHREADS: every iteration THREADS threads allocate one block each
// (k_growth), then a second kernel frees every other one of them (k_free over
// fresh), so the live set grows by THREADS / 2 blocks per iteration. It stops
// at the first iteration with a NULL, after as many iterations as would fill
// the heap 5% over (then it fails, as oom), or when the time budget is spent.
// Iterations run as churn's rounds (run_rounds), both kernels timed. Then
// every live block is filled and checked, the live set's address range after
// each iteration is taken from the extents of the iterations' kept blocks,
// and all are freed.
void run_growth(const context& c, const point& p) {
  if (c.baseline()) return;
  if (p.threads % 2) bench::fatal("growth point '%s': THREADS must be even (half are freed)", p.text.c_str());
  if (c.api.reset && !c.api.do_reset()) bench::fatal("gpualloc_reset failed");
  const size_rule r{p.lo, p.hi, c.seed};
  const unsigned long long heap = c.api.heap();
  if (!heap) bench::fatal("growth: heap size unknown");
  const unsigned long long kept = p.threads / 2;  // blocks an iteration adds to the live set
  const unsigned long long avg = p.hi ? (p.lo + p.hi) / 2 : p.lo;
  const unsigned cap = static_cast<unsigned>(heap / avg * 21 / 20 / kept + 2);  // as oom: 5% over the heap
  dbuf<void*> live(cap * kept), fresh(kept);
  dbuf<unsigned long long> nulls(cap + 1);  // [k]: the NULLs of iteration k; [0] stays 0
  BENCH_CUDA(cudaMemset(live.p, 0, cap * kept * sizeof(void*)));
  BENCH_CUDA(cudaMemset(nulls.p, 0, (cap + 1) * sizeof(unsigned long long)));
  // Load both kernels (lazy loading) before the first gated batch: launches with no work.
  k_growth<<<1, 1>>>(live.p, fresh.p, r, 0, 0, nulls.p, nulls.p, heap_source{});
  k_free<<<1, 1>>>(fresh.p, 0, heap_source{});
  BENCH_CUDA(cudaDeviceSynchronize());

  // Marks per iteration: 0 | alloc | 1 | free | 2.
  std::vector<double> alloc_ms, free_ms;
  const rounds_run run = run_rounds(
      c, std::chrono::steady_clock::now(), cap, 3, nulls.p,
      [&](unsigned k, bench::marks& m, size_t at) {
        m.at(at);
        k_growth<<<grid(p.threads), kBlock>>>(live.p, fresh.p, r, (k - 1) * kept, p.threads, nulls.p + k - 1,
                                              nulls.p + k, heap_source{});
        m.at(at + 1);
        k_free<<<grid(kept), kBlock>>>(fresh.p, kept, heap_source{});
        m.at(at + 2);
      },
      [&](const bench::marks& m, size_t at) {
        alloc_ms.push_back(m.ms(at, at + 1));
        free_ms.push_back(m.ms(at + 1, at + 2));
      });

  const unsigned done = run.first_null ? run.first_null : run.ok;  // iterations that ran
  const unsigned long long slots = done * kept;
  const check_result chk = verify_now(live.p, nullptr, r, slots, 0);
  std::vector<check_result> extent(done);
  if (done) {
    dbuf<check_result> d(done);
    k_iteration_extent<<<done, kBlock>>>(live.p, r, kept, d.p);
    BENCH_CUDA(cudaMemcpy(extent.data(), d.p, done * sizeof(check_result), cudaMemcpyDeviceToHost));
  }
  k_free<<<grid(slots), kBlock>>>(live.p, slots, heap_source{});
  BENCH_CUDA(cudaDeviceSynchronize());

  // outcome: null (first_null), cut (the time budget ended it first), cap (no
  // NULL where the heap must have run out: a failure).
  const bool at_cap = !run.first_null && !run.budget_hit;
  const char* outcome = run.first_null ? "null" : at_cap ? "cap" : "cut";
  const double range = chk.checked ? static_cast<double>(chk.highest_end - chk.lowest) : 0;
  const int failures = chk.corrupt || chk.misaligned || at_cap ? 1 : 0;
  char note[320];
  std::snprintf(note, sizeof note,
                "outcome=%s first_null=%u nulls_then=%llu iterations=%u/%u requested=%llu range_ratio=%.4f heap=%llu "
                "%s%s",
                outcome, run.first_null, run.nulls_then, run.ok, cap, chk.requested,
                chk.requested ? range / chk.requested : 0.0, heap, describe(chk).c_str(),
                run.budget_hit ? " stopped_by_time_budget" : "");
  auto emit_value = [&](const char* phase, const char* metric, const char* unit, double v) {
    bench::row row = make_row(c, p, phase);
    row.metric = metric;
    row.unit = unit;
    row.s = bench::summarize({v});
    row.failures = failures;
    row.note = note;
    bench::emit(row);
  };
  emit_value("util", "iterations", "iterations", run.ok);
  emit_value("util", "utilization", "fraction", static_cast<double>(chk.requested) / heap);
  emit_value("range", "range", "B", range);
  // The live set's address range after iteration k (at most 64 rows, the last
  // iteration always): `iters` holds k, the note the bytes live then.
  const unsigned step = (done + 63) / 64;
  unsigned long long lowest = ~0ull, highest_end = 0, requested = 0;
  for (unsigned k = 1; k <= done; ++k) {
    const check_result& e = extent[k - 1];
    lowest = std::min(lowest, e.lowest);
    highest_end = std::max(highest_end, e.highest_end);
    requested += e.requested;
    if (k % step && k != done) continue;
    bench::row row = make_row(c, p, "iteration");
    row.iters = k;
    row.metric = "range";
    row.unit = "B";
    row.s = bench::summarize({highest_end > lowest ? static_cast<double>(highest_end - lowest) : 0});
    row.failures = failures;
    row.note = "requested=" + std::to_string(requested);
    bench::emit(row);
  }
  const std::string timing = run.gate_timed_out ? "gate timed out (times may include launch gaps)" : "";
  emit_times(c, p, "alloc", alloc_ms, failures, timing);
  emit_times(c, p, "free", free_ms, failures, timing);
}

// Initialisation: context, first launch (module load + heap set-up), reset.
void run_init(const context& c) {
  point p;
  p.text = "init";
  auto t0 = std::chrono::steady_clock::now();
  BENCH_CUDA(cudaFree(nullptr));
  double ctx = bench::wall_ms_since(t0);
  dbuf<void*> slot(1);
  t0 = std::chrono::steady_clock::now();
  if (c.baseline()) {
    dbuf<char> s(16 * 32);
    k_alloc_uniform<<<1, 1>>>(slot.p, 16, 1, packed_source{s.p, 16});
    BENCH_CUDA(cudaDeviceSynchronize());
  } else {
    k_alloc_one<<<1, 1>>>(slot.p);
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  double first = bench::wall_ms_since(t0);
  if (!c.baseline()) {
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
  if (c.baseline()) return;
  bench::row rr = make_row(c, p, "reset");
  rr.mode = "reset";
  rr.size = 0;
  if (!c.api.reset) {
    rr.s = bench::summarize({});
    rr.note = "gpualloc_reset not available";
  } else {
    std::vector<double> t;
    const int reps = std::max(c.limits.max_samples, 1);
    for (int i = 0; i < reps; ++i) {
      auto t1 = std::chrono::steady_clock::now();
      if (!c.api.do_reset()) {
        ++rr.failures;
        continue;
      }
      t.push_back(bench::wall_ms_since(t1));
    }
    rr.s = bench::summarize(t);
    rr.iters = reps;
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

template <class Source>
void emit_regs_of(const context& c) {
  emit_regs(c, "alloc", k_alloc_uniform<Source>);
  emit_regs(c, "alloc_rule", k_alloc_rule<Source>);
  emit_regs(c, "alloc_loaded", k_alloc_loaded<Source>);
  emit_regs(c, "free", k_free<Source>);
  emit_regs(c, "acd", k_acd<Source>);
  emit_regs(c, "prob", k_prob<Source>);
}

void run_regs(const context& c) {
  switch (c.source) {
    case source_kind::heap: emit_regs_of<heap_source>(c); break;
    case source_kind::packed: emit_regs_of<packed_source>(c); break;
    case source_kind::bump: emit_regs_of<bump_source>(c); break;
  }
}

// The coalesce test: the three entries, one after another, for one point,
// each with a third of the point's time.
void run_coalesce(const context& c, const point& p) {
  context third = c;
  third.limits.budget_ms /= 3;
  third.limits.hard_limit_ms /= 3;
  run_alloc_free(third, p, entry::uniform, "alloc-uniform", "free-uniform", false);
  run_alloc_free(third, p, entry::loaded, "alloc-loaded", "free-loaded", false);
  if (p.hi) run_alloc_free(third, p, entry::rule, "alloc-mixed", "free-mixed", false);
}

void usage() {
  std::printf(
      "usage: gpualloc-bench-alloc --test single|mixed|scaling|coalesce|acd|prob|oom|churn|growth|init|regs\n"
      "         [--points SIZE[-MAX]xTHREADS[xITERS],...  (churn: SIZE[-MAX]xPERCENTxROUNDS)] [--mode warm|reset]\n"
      "         [--reps N] [--min-reps N] [--warmup N] [--budget-s SECONDS] [--hard-limit-s SECONDS]\n"
      "         [--seed N] [--baseline none|bump] [--reset-each-rep]\n"
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
  if (const char* b = a.get("--baseline")) {
    std::string kind = b;
    if (kind == "none") c.source = source_kind::packed;
    else if (kind == "bump") c.source = source_kind::bump;
    else bench::fatal("--baseline must be none or bump");
  }
  c.limits.max_samples = static_cast<int>(a.num("--reps", 15));
  c.limits.min_samples = static_cast<int>(a.num("--min-reps", 3));
  c.limits.warmup = static_cast<int>(a.num("--warmup", 1));
  c.limits.budget_ms = a.real("--budget-s", 60) * 1e3;
  c.limits.hard_limit_ms = a.real("--hard-limit-s", 1e6) * 1e3;
  c.seed = static_cast<unsigned>(a.num("--seed", 1));
  c.never_reuses = a.flag("--reset-each-rep");
  const char* coalesce = std::getenv("GPUALLOC_COALESCE");
  c.coalescing = !(coalesce && std::string(coalesce) == "0");
  if (c.mode != "warm" && c.mode != "reset") bench::fatal("--mode must be warm or reset");
  if (c.limits.max_samples < 1 || c.limits.min_samples < 1) bench::fatal("--reps and --min-reps must be at least 1");

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
  if (c.reset_mode && !c.baseline() && !c.api.reset)
    bench::fatal("--mode reset needs gpualloc_reset (libgpualloc not loaded?)");

  if (c.test == "regs") {
    run_regs(c);
    return 0;
  }
  // Load the module and let libgpualloc set up the heap before any timing.
  if (!c.baseline()) {
    dbuf<void*> slot(1);
    k_alloc_one<<<1, 1>>>(slot.p);
    k_free_one<<<1, 1>>>(slot.p);
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  const char* pts = a.get("--points");
  if (!pts) bench::fatal("--points is required for --test %s", c.test.c_str());
  if (c.test == "coalesce") c.mode = c.coalescing ? "on" : "off";  // the rows' label
  for (const std::string& s : bench::split(pts, ',')) {
    point p = parse_point(s);
    bench::begin_point(s.c_str());
    if (c.test == "single" || c.test == "scaling")
      run_alloc_free(c, p, entry::uniform, "alloc", "free", c.test == "single");
    else if (c.test == "mixed")
      run_alloc_free(c, p, entry::rule, "alloc", "free", true);
    else if (c.test == "coalesce")
      run_coalesce(c, p);
    else if (c.test == "acd")
      run_acd(c, p);
    else if (c.test == "prob")
      run_prob(c, p);
    else if (c.test == "oom")
      run_oom(c, p);
    else if (c.test == "churn")
      run_churn(c, p);
    else if (c.test == "growth")
      run_growth(c, p);
    else
      bench::fatal("unknown test '%s'", c.test.c_str());
  }
  std::printf("DONE\n");
  return 0;
}
