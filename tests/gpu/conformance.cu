// The strategy conformance suite: an unmodified program, run under every
// registered strategy, with expectations taken from the registry.
//
//  rounds      2^20 threads allocate mixed sizes from 1 B to 9000 B, write a
//              pattern into every byte they own, verify it, free; no two live
//              blocks overlap; every pointer is 16-byte aligned.
//  churn       (reuse `full` only) in one kernel, threads free and allocate
//              blocks of 1 KiB - 1 MiB (powers of two, so a size-class
//              allocator wastes nothing) at random while the live bytes stay
//              in a band; every block's pattern is verified when it is freed
//              and at the end, the blocks still live at the end are disjoint.
//              Band "below the promise": 80-95% of the bytes the strategy
//              promises to keep serving under churn (registry: churn_percent), where every
//              NULL is a failure (the heap had room it promised); band "past
//              the promise": 80-95% of the heap, where NULLs are allowed
//              (counted) but nothing may be lost or overwritten.
//  exhaustion  threads allocate large blocks until the heap says NULL; what
//              they got must be intact, disjoint and at least the promised
//              percentage of the heap; after freeing all of it, strategies
//              that reuse memory must serve the promise again, those that
//              never reuse must stay full, a wrapping one never says NULL.
//
// Every kernel ends in bounded time: loops have fixed trip counts and the
// churn kernel also stops at a deadline (%globaltimer), whatever the
// allocator does. CUDA's own allocator needs minutes for 2^20 threads at
// these sizes, so the `cuda` strategy runs fewer threads.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_HEAP_SIZE=4G %for-each-strategy --timeout 300 -- %gpu-bin/conformance
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "Inputs/check.h"
#include "gpualloc/registry.h"

namespace {

struct block {
  std::uintptr_t address;
  std::uint64_t bytes;
};

__host__ __device__ std::uint32_t mix(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

constexpr std::uint64_t round16(std::uint64_t n) { return (n + 15) / 16 * 16; }

// ---- rounds ---------------------------------------------------------------------

// Mostly small requests, some large: 60% 1-64 B, 25% up to 512 B, 10% up to 4 KiB, 5% up to 9000 B.
__device__ std::uint32_t request_size(std::uint32_t thread, std::uint32_t round) {
  std::uint32_t r = mix(thread * 0x9e3779b9U + round), pick = r % 100, v = r >> 8;
  if (pick < 60) return 1 + v % 64;
  if (pick < 85) return 65 + v % 448;
  if (pick < 95) return 513 + v % 3584;
  return 4097 + v % 4904;
}

__device__ unsigned char pattern(std::uint32_t owner, std::uint64_t i) { return (unsigned char)(owner * 31 + i * 7 + 1); }

__global__ void allocate_round(void** ptrs, std::uint32_t* sizes, std::uint32_t round, unsigned* nulls) {
  std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  std::uint32_t size = request_size(t, round);
  auto* p = static_cast<unsigned char*>(malloc(size));
  ptrs[t] = p;
  sizes[t] = size;
  if (p == nullptr) {
    atomicAdd(nulls, 1u);
    return;
  }
  for (std::uint32_t i = 0; i < size; ++i) p[i] = pattern(t + round, i);
}

__global__ void verify_and_free(void** ptrs, const std::uint32_t* sizes, std::uint32_t round, unsigned* bad,
                                unsigned* misaligned) {
  std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  auto* p = static_cast<unsigned char*>(ptrs[t]);
  if (p == nullptr) return;
  if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) atomicAdd(misaligned, 1u);
  for (std::uint32_t i = 0; i < sizes[t]; ++i)
    if (p[i] != pattern(t + round, i)) {
      atomicAdd(bad, 1u);
      break;
    }
  free(p);
}

// ---- churn ----------------------------------------------------------------------

__device__ std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A block's pattern: 16-byte words naming its tag and their index.
__device__ void fill_block(uint4* p, std::uint32_t bytes, std::uint32_t tag) {
  for (std::uint32_t i = 0; i < bytes / 16; ++i) p[i] = make_uint4(tag, i, ~tag, tag ^ (i * 0x9e3779b9u));
}

__device__ bool block_intact(const uint4* p, std::uint32_t bytes, std::uint32_t tag) {
  bool ok = true;
  for (std::uint32_t i = 0; i < bytes / 16; ++i) {
    uint4 w = p[i];
    ok &= w.x == tag && w.y == i && w.z == ~tag && w.w == (tag ^ (i * 0x9e3779b9u));
  }
  return ok;
}

struct churn_slot {
  unsigned long long address;  // 0: empty
  std::uint32_t bytes;
  std::uint32_t tag;
};

// What one churn kernel does. Its threads pick slot sets at random; a set
// is taken with a try-lock (a busy set is skipped, never waited for), so a
// block is often freed by another thread, warp or SM than the one that
// allocated it.
struct churn_plan {
  std::uint64_t low, high;              // the band of committed bytes
  std::uint32_t min_shift, max_shift;   // request sizes: 2^min_shift .. 2^max_shift
  std::uint32_t sets, slots_per_set;
  std::uint32_t ops_per_thread;
  std::uint64_t budget_ns;              // each thread stops after this long
  int nulls_allowed;                    // 0: the band lies within the promise, every NULL is a failure
};

struct churn_counters {
  // Bytes of live blocks plus requests in flight: raised before malloc,
  // lowered after free returns (or after a NULL), so at every moment it is
  // at least the live bytes the allocator holds. A reservation that would
  // take it past `high` is withdrawn, so it never stays above `high`.
  unsigned long long committed;
  unsigned long long peak;
  unsigned long long ops, in_band, allocs, frees, nulls, unexplained, corrupt, misaligned, busy;
  unsigned long long example_taken, example_committed, example_bytes;  // the first unexplained NULL
};

__global__ void churn(churn_slot* slots, unsigned* locks, churn_plan plan, churn_counters* c) {
  const std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  const std::uint64_t start = now_ns();
  auto* committed = &c->committed;
  unsigned long long ops = 0, in_band = 0, allocs = 0, frees = 0, nulls = 0, unexplained = 0, corrupt = 0,
                     misaligned = 0, busy = 0;
  std::uint32_t rng = mix(t * 0x9e3779b9u + 0x632be5abu);
  for (std::uint32_t op = 0; op < plan.ops_per_thread; ++op) {
    if (now_ns() - start > plan.budget_ns) break;
    rng = mix(rng + op);
    const std::uint32_t set = rng % plan.sets;
    if (atomicCAS(&locks[set], 0u, 1u) != 0u) {
      ++busy;
      continue;
    }
    __threadfence();  // acquire: the previous holder's slot writes and block contents
    churn_slot* s = slots + (std::uint64_t)set * plan.slots_per_set;
    std::uint32_t full = 0, empty = 0;
    for (std::uint32_t k = 0; k < plan.slots_per_set; ++k) (s[k].address ? full : empty) += 1;
    const std::uint32_t pick = mix(rng ^ 0x2545f491u);
    const unsigned long long now_committed = *(volatile unsigned long long*)committed;
    bool allocate = empty == 0 ? false : full == 0 ? true : now_committed < plan.low ? true : (pick >> 16) & 1;
    if (now_committed >= plan.low) ++in_band;

    if (allocate) {
      churn_slot* slot = s;  // the (pick % empty)-th empty slot
      for (std::uint32_t k = 0, seen = 0; k < plan.slots_per_set; ++k)
        if (!s[k].address && seen++ == pick % empty) slot = &s[k];
      const std::uint32_t bytes = 1u << (plan.min_shift + mix(pick + op) % (plan.max_shift - plan.min_shift + 1));
      const unsigned long long before = atomicAdd(committed, (unsigned long long)bytes);
      if (before + bytes > plan.high) {
        atomicAdd(committed, 0ull - bytes);  // withdrawn: free something instead
        allocate = false;
      } else {
        atomicMax(&c->peak, before + bytes);
        auto* p = static_cast<uint4*>(malloc(bytes));
        if (p == nullptr) {
          atomicAdd(committed, 0ull - bytes);
          ++nulls;
          if (!plan.nulls_allowed) {
            ++unexplained;
            if (atomicCAS(&c->example_taken, 0ull, 1ull) == 0ull) {
              c->example_committed = before + bytes;
              c->example_bytes = bytes;
            }
          }
        } else if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) {
          ++misaligned;
          free(p);
          atomicAdd(committed, 0ull - bytes);
        } else {
          const std::uint32_t tag = mix(t ^ (op << 20) ^ set) | 1u;
          fill_block(p, bytes, tag);
          slot->address = reinterpret_cast<unsigned long long>(p);
          slot->bytes = bytes;
          slot->tag = tag;
          ++allocs;
        }
      }
    }
    if (!allocate && full > 0) {
      churn_slot* slot = s;  // the (pick % full)-th full slot
      for (std::uint32_t k = 0, seen = 0; k < plan.slots_per_set; ++k)
        if (s[k].address && seen++ == pick % full) slot = &s[k];
      auto* p = reinterpret_cast<uint4*>(slot->address);
      if (!block_intact(p, slot->bytes, slot->tag)) ++corrupt;
      free(p);
      atomicAdd(committed, 0ull - slot->bytes);
      slot->address = 0;
      ++frees;
    }
    __threadfence();  // release: this thread's slot writes and block contents
    atomicExch(&locks[set], 0u);
    ++ops;
  }
  atomicAdd(&c->ops, ops);
  atomicAdd(&c->in_band, in_band);
  atomicAdd(&c->allocs, allocs);
  atomicAdd(&c->frees, frees);
  atomicAdd(&c->nulls, nulls);
  atomicAdd(&c->unexplained, unexplained);
  atomicAdd(&c->corrupt, corrupt);
  atomicAdd(&c->misaligned, misaligned);
  atomicAdd(&c->busy, busy);
}

// The blocks still live after a churn kernel: checked and freed.
__global__ void churn_release(churn_slot* slots, std::uint64_t count, churn_counters* c) {
  for (std::uint64_t i = blockIdx.x * (std::uint64_t)blockDim.x + threadIdx.x; i < count;
       i += (std::uint64_t)gridDim.x * blockDim.x) {
    churn_slot& s = slots[i];
    if (!s.address) continue;
    auto* p = reinterpret_cast<uint4*>(s.address);
    if (!block_intact(p, s.bytes, s.tag)) atomicAdd(&c->corrupt, 1ull);
    free(p);
    atomicAdd(&c->committed, 0ull - s.bytes);
    s.address = 0;
  }
}

// ---- exhaustion -----------------------------------------------------------------

// Each thread takes up to `slots` blocks of `bytes` until malloc says NULL,
// marking the first and last word of each.
__global__ void exhaust(void** table, int slots, std::uint64_t bytes, unsigned* nulls) {
  std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int s = 0; s < slots; ++s) {
    auto* p = static_cast<std::uint64_t*>(malloc(bytes));
    table[(std::uint64_t)t * slots + s] = p;
    if (p == nullptr) {
      atomicAdd(nulls, 1u);
      for (++s; s < slots; ++s) table[(std::uint64_t)t * slots + s] = nullptr;
      return;
    }
    p[0] = t;
    p[bytes / 8 - 1] = ~(std::uint64_t)t;
  }
}

__global__ void check_and_release(void** table, int slots, std::uint64_t bytes, unsigned* bad) {
  std::uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int s = 0; s < slots; ++s) {
    auto* p = static_cast<std::uint64_t*>(table[(std::uint64_t)t * slots + s]);
    if (p == nullptr) continue;
    if (p[0] != t || p[bytes / 8 - 1] != ~(std::uint64_t)t) atomicAdd(bad, 1u);
    free(p);
  }
}

// ---- host -----------------------------------------------------------------------

// Sorted by address, no block may reach into the next one.
bool disjoint(std::vector<block>& blocks, const char* phase) {
  std::sort(blocks.begin(), blocks.end(), [](const block& a, const block& b) { return a.address < b.address; });
  for (std::size_t i = 1; i < blocks.size(); ++i)
    if (blocks[i - 1].address + blocks[i - 1].bytes > blocks[i].address) {
      std::fprintf(stderr, "%s: blocks at %#lx (+%lu) and %#lx overlap\n", phase, (unsigned long)blocks[i - 1].address,
                   (unsigned long)blocks[i - 1].bytes, (unsigned long)blocks[i].address);
      return false;
    }
  return true;
}

const gpualloc::strategy_info& strategy_under_test() {
  const char* name = std::getenv("GPUALLOC_STRATEGY");
  const gpualloc::strategy_info* s =
      name ? gpualloc::find_strategy(name) : &gpualloc::strategy(gpualloc::default_strategy);
  EXPECT(s != nullptr, "GPUALLOC_STRATEGY=%s is not registered", name);
  return *s;
}

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0; }

// One churn kernel with live bytes in [80%, 95%] of `capacity`, then the
// checks. `promised` is the byte count below which the strategy promises
// never to say NULL.
void churn_band(const char* name, std::uint64_t capacity, std::uint64_t heap_bytes, std::uint64_t promised,
                bool is_cuda) {
  churn_plan plan{};
  plan.high = capacity / 100 * 95;
  plan.low = capacity / 100 * 80;
  plan.nulls_allowed = plan.high > promised;
  const std::uint32_t threads = is_cuda ? 1u << 10 : 1u << 16, block_threads = 256;
  plan.sets = threads;
  plan.ops_per_thread = is_cuda ? 24 : 32;
  plan.budget_ns = 4'000'000'000ull;
  // Three powers of two around the size at which half the slots hold the
  // band's top, within the 1 KiB - 1 MiB the promise speaks of.
  plan.slots_per_set = 8;
  const std::uint64_t target = plan.high / ((std::uint64_t)plan.sets * plan.slots_per_set / 2);
  std::uint32_t shift = 10;
  while (shift < 19 && (2ull << shift) <= target) ++shift;  // 2^shift <= target < 2^(shift+1)
  plan.min_shift = std::max(10u, shift - 1);
  plan.max_shift = std::min(20u, shift + 1);
  const std::uint64_t average = ((2ull << plan.max_shift) - (1ull << plan.min_shift)) / (plan.max_shift - plan.min_shift + 1);
  while ((std::uint64_t)plan.sets * plan.slots_per_set * average < plan.high / 2 * 3 && plan.slots_per_set < 64)
    plan.slots_per_set *= 2;  // a heap too large for the sizes: more slots

  const std::uint64_t slot_count = (std::uint64_t)plan.sets * plan.slots_per_set;
  churn_slot* slots;
  unsigned* locks;
  churn_counters* c;
  CHECK(cudaMalloc(&slots, slot_count * sizeof(churn_slot)));
  CHECK(cudaMemset(slots, 0, slot_count * sizeof(churn_slot)));
  CHECK(cudaMalloc(&locks, plan.sets * sizeof(unsigned)));
  CHECK(cudaMemset(locks, 0, plan.sets * sizeof(unsigned)));
  CHECK(cudaMallocManaged(&c, sizeof(churn_counters)));
  *c = churn_counters{};

  auto t0 = std::chrono::steady_clock::now();
  churn<<<threads / block_threads, block_threads>>>(slots, locks, plan, c);
  SYNC_CHECK();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::vector<churn_slot> left(slot_count);
  CHECK(cudaMemcpy(left.data(), slots, slot_count * sizeof(churn_slot), cudaMemcpyDeviceToHost));
  std::vector<block> live;
  for (const churn_slot& s : left)
    if (s.address) live.push_back({(std::uintptr_t)s.address, s.bytes});
  const std::size_t live_blocks = live.size();
  const bool separate = disjoint(live, name);
  churn_release<<<256, 256>>>(slots, slot_count, c);
  SYNC_CHECK();

  std::printf("conformance: churn %s: live bytes kept in %.1f-%.1f%% of the heap (promise %.1f%%), blocks %u-%u B, "
              "%u threads, %.0f ms: %llu ops (%.0f%% in the band, %llu skipped busy sets), %llu mallocs, %llu frees, "
              "peak %.1f%%, %llu NULLs%s, %zu blocks live at the end\n",
              name, percent(plan.low, heap_bytes), percent(plan.high, heap_bytes), percent(promised, heap_bytes),
              1u << plan.min_shift, 1u << plan.max_shift, threads, ms, c->ops, percent(c->in_band, c->ops), c->busy, c->allocs,
              c->frees, percent(c->peak, heap_bytes), c->nulls, plan.nulls_allowed ? " (allowed here)" : "",
              live_blocks);
  EXPECT(separate, "churn %s: live blocks overlap", name);
  EXPECT(c->misaligned == 0, "churn %s: %llu blocks not 16-byte aligned", name, c->misaligned);
  EXPECT(c->corrupt == 0, "churn %s: %llu blocks lost their pattern (overwritten while live)", name, c->corrupt);
  EXPECT(c->committed == 0, "churn %s: bookkeeping left %llu bytes committed", name, c->committed);
  EXPECT(c->unexplained == 0,
         "churn %s: %llu NULLs while at most %.1f%% of the heap was live or requested (the strategy promises "
         "%.1f%%); e.g. a %llu-byte request with at most %llu bytes (%.1f%%) live including it: the heap had room",
         name, c->unexplained, percent(plan.high, heap_bytes), percent(promised, heap_bytes), c->example_bytes,
         c->example_committed, percent(c->example_committed, heap_bytes));
  EXPECT(c->peak >= plan.low, "churn %s: the band was never reached (peak %.1f%% of the heap, band from %.1f%%) in %.0f ms",
         name, percent(c->peak, heap_bytes), percent(plan.low, heap_bytes), ms);
  CHECK(cudaFree(slots));
  CHECK(cudaFree(locks));
  CHECK(cudaFree(c));
}

}  // namespace

int main() {
  const gpualloc::strategy_info& strategy = strategy_under_test();
  const bool is_cuda = strategy.id == gpualloc::strategy_id::cuda;
  const std::uint32_t threads = is_cuda ? 1u << 14 : 1u << 20, block_threads = 256, rounds = 3;
  std::printf("conformance: %.*s (reuse %.*s, promises %u%% of the heap), %u threads\n", (int)strategy.name.size(),
              strategy.name.data(), (int)gpualloc::reuse_policy_name(strategy.reuse).size(),
              gpualloc::reuse_policy_name(strategy.reuse).data(), strategy.utilisation_percent, threads);

  void** ptrs;
  std::uint32_t* sizes;
  unsigned* counters;  // [0] nulls, [1] corrupted, [2] misaligned
  CHECK(cudaMalloc(&ptrs, threads * sizeof(void*)));
  CHECK(cudaMalloc(&sizes, threads * sizeof(std::uint32_t)));
  CHECK(cudaMallocManaged(&counters, 3 * sizeof(unsigned)));
  std::vector<void*> host_ptrs(threads);
  std::vector<std::uint32_t> host_sizes(threads);
  std::uint64_t handed_out = 0;  // bytes served so far (what a strategy that never reuses has used up)

  for (std::uint32_t round = 0; round < rounds; ++round) {
    counters[0] = counters[1] = counters[2] = 0;
    allocate_round<<<threads / block_threads, block_threads>>>(ptrs, sizes, round, &counters[0]);
    SYNC_CHECK();
    CHECK(cudaMemcpy(host_ptrs.data(), ptrs, threads * sizeof(void*), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(host_sizes.data(), sizes, threads * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    verify_and_free<<<threads / block_threads, block_threads>>>(ptrs, sizes, round, &counters[1], &counters[2]);
    SYNC_CHECK();
    EXPECT(counters[0] == 0, "round %u: %u of %u mixed-size requests got NULL", round, counters[0], threads);
    EXPECT(counters[1] == 0, "round %u: %u blocks corrupted", round, counters[1]);
    EXPECT(counters[2] == 0, "round %u: %u blocks not 16-byte aligned", round, counters[2]);
    std::vector<block> live;
    for (std::uint32_t t = 0; t < threads; ++t)
      if (host_ptrs[t]) {
        live.push_back({reinterpret_cast<std::uintptr_t>(host_ptrs[t]), host_sizes[t]});
        handed_out += round16(host_sizes[t]);
      }
    EXPECT(disjoint(live, "rounds"), "round %u: live blocks overlap", round);
  }
  std::printf("conformance: %u rounds of mixed sizes ok\n", rounds);

  size_t heap_bytes = 0;
  CHECK(cudaDeviceGetLimit(&heap_bytes, cudaLimitMallocHeapSize));
  // 0 promises "never NULL": then no NULL is explained by a full heap.
  const double promise = strategy.utilisation_percent ? strategy.utilisation_percent / 100.0 : 1.0;
  const std::uint64_t promised = (std::uint64_t)(promise * heap_bytes);
  const double churn_promise = strategy.churn_percent / 100.0;
  const std::uint64_t churn_promised = (std::uint64_t)(churn_promise * heap_bytes);

  if (strategy.reuse == gpualloc::reuse_policy::full) {
    churn_band("below the promise", churn_promised, heap_bytes, churn_promised, is_cuda);
    if (churn_promise < 0.95) churn_band("past the promise", heap_bytes, heap_bytes, churn_promised, is_cuda);
  }

  // Exhaustion: enough requests for twice the heap, in blocks of 1 KiB to 1 MiB.
  const std::uint32_t exhaust_threads = is_cuda ? 1u << 10 : 1u << 14;
  const int slots = 64;
  std::uint64_t bytes = 2 * (std::uint64_t)heap_bytes / ((std::uint64_t)exhaust_threads * slots);
  bytes = std::clamp<std::uint64_t>(round16(bytes), 1 << 10, 1 << 20);
  void** table;
  CHECK(cudaMalloc(&table, (std::uint64_t)exhaust_threads * slots * sizeof(void*)));
  std::vector<void*> host_table((std::uint64_t)exhaust_threads * slots);

  auto exhaust_once = [&](const char* phase) {
    counters[0] = counters[1] = 0;
    exhaust<<<exhaust_threads / block_threads, block_threads>>>(table, slots, bytes, &counters[0]);
    SYNC_CHECK();
    CHECK(cudaMemcpy(host_table.data(), table, host_table.size() * sizeof(void*), cudaMemcpyDeviceToHost));
    std::vector<block> got;
    for (void* p : host_table)
      if (p) got.push_back({reinterpret_cast<std::uintptr_t>(p), bytes});
    unsigned nulls = counters[0];
    bool separate = strategy.reuse == gpualloc::reuse_policy::unsafe || disjoint(got, phase);
    check_and_release<<<exhaust_threads / block_threads, block_threads>>>(table, slots, bytes, &counters[1]);
    SYNC_CHECK();
    EXPECT(separate, "%s: blocks overlap", phase);
    if (strategy.reuse != gpualloc::reuse_policy::unsafe)
      EXPECT(counters[1] == 0, "%s: %u blocks corrupted", phase, counters[1]);
    std::printf("conformance: %s: %zu blocks of %lu B (%.1f%% of the %zu B heap), %u threads saw NULL\n", phase,
                got.size(), (unsigned long)bytes, percent((double)got.size() * bytes, heap_bytes), heap_bytes, nulls);
    return std::make_pair(got.size(), nulls);
  };
  // The promise: this much of the heap handed out before the first NULL.
  auto expect_promise = [&](const char* phase, std::uint64_t served) {
    EXPECT(served >= promised,
           "%s: the strategy handed out %.1f%% of the heap (%llu of %zu bytes, in %llu-byte blocks) before saying "
           "NULL, it promises %u%% (registry utilisation_percent)",
           phase, percent(served, heap_bytes), (unsigned long long)served, heap_bytes, (unsigned long long)bytes,
           strategy.utilisation_percent);
  };

  auto [first, first_nulls] = exhaust_once("exhaustion");
  auto [second, second_nulls] = exhaust_once("after freeing");
  switch (strategy.reuse) {
    case gpualloc::reuse_policy::full:
      EXPECT(first_nulls > 0, "the heap never ran out although twice its size was requested");
      expect_promise("exhaustion", first * bytes);
      expect_promise("after freeing", second * bytes);
      EXPECT(second >= first * 9 / 10, "after freeing everything only %zu of %zu blocks could be allocated again",
             second, first);
      break;
    case gpualloc::reuse_policy::none:
      EXPECT(first_nulls > 0, "the heap never ran out although twice its size was requested");
      // It never reuses: what the rounds took counts as handed out.
      expect_promise("exhaustion (counting the rounds' blocks)", handed_out + first * bytes);
      EXPECT(second == 0, "a strategy that never reuses memory handed out %zu blocks after running out", second);
      break;
    case gpualloc::reuse_policy::unsafe:
      EXPECT(first_nulls == 0 && second_nulls == 0, "a wrapping strategy returned NULL");
      break;
  }
  std::printf("conformance: ok\n");
  return 0;
}
