// The strategy conformance suite: an unmodified program, run under every
// registered strategy, with expectations taken from the registry.
//
//  rounds      2^20 threads allocate mixed sizes from 1 B to 9000 B, write a
//              pattern into every byte they own, verify it, free; no two live
//              blocks overlap; every pointer is 16-byte aligned.
//  exhaustion  threads allocate large blocks until the heap says NULL; what
//              they got must be intact and disjoint; after freeing all of it,
//              strategies that reuse memory must serve as much again, those
//              that never reuse must stay full, a wrapping one never says NULL.
//
// CUDA's own allocator needs minutes for 2^20 threads at these sizes, so the
// `cuda` strategy runs 2^14 threads.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_HEAP_SIZE=4G %for-each-strategy --timeout 300 -- %gpu-bin/conformance
#include <algorithm>
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

}  // namespace

int main() {
  const gpualloc::strategy_info& strategy = strategy_under_test();
  const bool is_cuda = strategy.id == gpualloc::strategy_id::cuda;
  const std::uint32_t threads = is_cuda ? 1u << 14 : 1u << 20, block_threads = 256, rounds = 3;
  std::printf("conformance: %.*s (reuse %.*s), %u threads\n", (int)strategy.name.size(), strategy.name.data(),
              (int)gpualloc::reuse_policy_name(strategy.reuse).size(), gpualloc::reuse_policy_name(strategy.reuse).data(),
              threads);

  void** ptrs;
  std::uint32_t* sizes;
  unsigned* counters;  // [0] nulls, [1] corrupted, [2] misaligned
  CHECK(cudaMalloc(&ptrs, threads * sizeof(void*)));
  CHECK(cudaMalloc(&sizes, threads * sizeof(std::uint32_t)));
  CHECK(cudaMallocManaged(&counters, 3 * sizeof(unsigned)));
  std::vector<void*> host_ptrs(threads);
  std::vector<std::uint32_t> host_sizes(threads);

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
      if (host_ptrs[t]) live.push_back({reinterpret_cast<std::uintptr_t>(host_ptrs[t]), host_sizes[t]});
    EXPECT(disjoint(live, "rounds"), "round %u: live blocks overlap", round);
  }
  std::printf("conformance: %u rounds of mixed sizes ok\n", rounds);

  // Exhaustion: enough requests for twice the heap.
  size_t heap_bytes = 0;
  CHECK(cudaDeviceGetLimit(&heap_bytes, cudaLimitMallocHeapSize));
  const std::uint32_t exhaust_threads = is_cuda ? 1u << 10 : 1u << 14;
  const int slots = 64;
  std::uint64_t bytes = 2 * (std::uint64_t)heap_bytes / ((std::uint64_t)exhaust_threads * slots);
  bytes = std::min<std::uint64_t>(std::max<std::uint64_t>((bytes + 15) / 16 * 16, 64), 1 << 20);
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
                got.size(), (unsigned long)bytes, 100.0 * got.size() * bytes / heap_bytes, heap_bytes, nulls);
    return std::make_pair(got.size(), nulls);
  };

  auto [first, first_nulls] = exhaust_once("exhaustion");
  auto [second, second_nulls] = exhaust_once("after freeing");
  switch (strategy.reuse) {
    case gpualloc::reuse_policy::full:
      EXPECT(first_nulls > 0, "the heap never ran out although twice its size was requested");
      EXPECT(second >= first * 9 / 10, "after freeing everything only %zu of %zu blocks could be allocated again",
             second, first);
      break;
    case gpualloc::reuse_policy::none:
      EXPECT(first_nulls > 0, "the heap never ran out although twice its size was requested");
      EXPECT(second == 0, "a strategy that never reuses memory handed out %zu blocks after running out", second);
      break;
    case gpualloc::reuse_policy::unsafe:
      EXPECT(first_nulls == 0 && second_nulls == 0, "a wrapping strategy returned NULL");
      break;
  }
  std::printf("conformance: ok\n");
  return 0;
}
