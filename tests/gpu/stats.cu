// GPUALLOC_STATS=1 counts every allocation, free, failure and byte exactly,
// under every strategy, with warps of all shapes: full warps, partial warps,
// lanes of one warp at different sizes, with warp coalescing on and off
// (GPUALLOC_COALESCE=0). The counters come from libgpualloc's
// host API (Inputs/counters.h).
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_STATS=1 GPUALLOC_HEAP_SIZE=1G %for-each-strategy -- %gpu-bin/stats
// RUN: env GPUALLOC_STATS=1 GPUALLOC_HEAP_SIZE=1G GPUALLOC_COALESCE=0 %for-each-strategy -- %gpu-bin/stats
#include <cstdio>

#include "Inputs/check.h"
#include "Inputs/counters.h"

// Threads with (tid % 3 != 0) allocate 1 + tid % 100 bytes; every 64th thread
// also asks for something no heap holds.
__global__ void allocate(void** slots, unsigned* failed) {
  unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  slots[tid] = nullptr;
  if (tid % 3 == 0) return;
  slots[tid] = malloc(1 + tid % 100);
  if (slots[tid] == nullptr) atomicAdd(failed, 1u);
  if (tid % 64 == 1 && malloc(size_t{1} << 50) != nullptr) atomicAdd(failed, 1000000u);
}

__global__ void release(void** slots) { free(slots[blockIdx.x * blockDim.x + threadIdx.x]); }

int main() {
  const unsigned block = 96, threads = 700 * block;  // tid % 3 splits every warp
  void** slots;
  unsigned* failed;
  CHECK(cudaMalloc(&slots, threads * sizeof(void*)));
  CHECK(cudaMallocManaged(&failed, sizeof(unsigned)));
  *failed = 0;

  unsigned long long allocating = 0, bytes = 0, huge = 0;
  for (unsigned t = 0; t < threads; ++t) {
    if (t % 3 == 0) continue;
    ++allocating;
    bytes += 1 + t % 100;
    huge += t % 64 == 1;
  }
  allocate<<<threads / block, block>>>(slots, failed);
  SYNC_CHECK();
  EXPECT(*failed == 0, "%u allocations failed (or huge ones succeeded)", *failed);
  counters c = read_counters();
  std::printf("after allocating: mallocs %llu failed %llu in use %llu peak %llu\n", c.mallocs, c.failed_mallocs,
              c.bytes_in_use, c.peak_bytes);
  EXPECT(c.mallocs == allocating, "mallocs %llu, expected %llu", c.mallocs, allocating);
  EXPECT(c.failed_mallocs == huge, "failed mallocs %llu, expected %llu", c.failed_mallocs, huge);
  EXPECT(c.bytes_in_use == bytes && c.peak_bytes == bytes, "bytes in use %llu, peak %llu, expected %llu",
         c.bytes_in_use, c.peak_bytes, bytes);

  release<<<threads / block, block>>>(slots);
  SYNC_CHECK();
  c = read_counters();
  EXPECT(c.frees == allocating, "frees %llu, expected %llu", c.frees, allocating);
  EXPECT(c.bytes_in_use == 0 && c.peak_bytes == bytes, "after freeing: in use %llu, peak %llu", c.bytes_in_use,
         c.peak_bytes);
  std::printf("stats: ok\n");
  return 0;
}
