// Checked mode with half the heap held in the quarantine: threads fill the
// heap with 4 KiB blocks until NULL, free them all (the ring keeps the last
// freed thousands: a 64 MiB heap has 8,192 slots, about half of it in
// blocks this size), and fill it again. The requests that find the heap
// full drain the quarantine together (quarantine.h Q3) and are served, so
// the second fill must reach what the first did: an allocation fails only
// where the heap without the quarantine's blocks could not serve it. Each
// block carries its owner's mark, checked when it is freed. Under every
// strategy that reuses memory; the others have nothing to drain into.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=64M %for-each-strategy -- %gpu-bin/quarantine_full
#include <cstdio>

#include "Inputs/check.h"
#include "Inputs/counters.h"
#include "gpualloc/registry.h"

namespace {

constexpr unsigned threads = 4096, block_threads = 128, per_thread = 8, block_bytes = 4000;

// Each thread: up to per_thread blocks, until the first NULL; `served` counts them.
__global__ void fill(unsigned** blocks, unsigned* served) {
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned got = 0;
  for (unsigned i = 0; i < per_thread; ++i) {
    auto* p = static_cast<unsigned*>(malloc(block_bytes));
    blocks[tid * per_thread + i] = p;
    if (p == nullptr) break;
    p[0] = tid;
    p[block_bytes / sizeof(unsigned) - 1] = tid;
    ++got;
  }
  atomicAdd(served, got);
}

__global__ void release(unsigned** blocks, unsigned* marred) {
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  for (unsigned i = 0; i < per_thread; ++i) {
    unsigned* p = blocks[tid * per_thread + i];
    if (p == nullptr) break;
    if (p[0] != tid || p[block_bytes / sizeof(unsigned) - 1] != tid) atomicAdd(marred, 1u);
    free(p);
  }
}

}  // namespace

int main() {
  const gpualloc::strategy_info* strategy = gpualloc::find_strategy(strategy_name());  // the one libgpualloc runs
  EXPECT(strategy != nullptr, "libgpualloc runs %s, which the registry does not know", strategy_name());
  if (strategy->reuse != gpualloc::reuse_policy::full) {
    std::printf("quarantine_full: %s does not reuse memory: nothing to drain into\n", strategy_name());
    return 0;
  }
  unsigned** blocks;
  unsigned* served;  // [0] first fill, [1] second fill, [2] blocks found marred
  CHECK(cudaMalloc(&blocks, threads * per_thread * sizeof(unsigned*)));
  CHECK(cudaMallocManaged(&served, 3 * sizeof(unsigned)));
  served[0] = served[1] = served[2] = 0;

  fill<<<threads / block_threads, block_threads>>>(blocks, &served[0]);
  SYNC_CHECK();
  EXPECT(served[0] < threads * per_thread, "the first fill never saw NULL (%u blocks)", served[0]);
  release<<<threads / block_threads, block_threads>>>(blocks, &served[2]);
  SYNC_CHECK();
  fill<<<threads / block_threads, block_threads>>>(blocks, &served[1]);
  SYNC_CHECK();
  release<<<threads / block_threads, block_threads>>>(blocks, &served[2]);
  SYNC_CHECK();

  const counters c = read_counters();
  std::printf("quarantine_full: %s: %u blocks of %u B, then %u with the quarantine full\n", strategy_name(), served[0],
              block_bytes, served[1]);
  EXPECT(served[1] >= served[0] / 10 * 9, "the second fill got %u blocks, the first %u", served[1], served[0]);
  EXPECT(served[2] == 0, "%u blocks were written by someone else", served[2]);
  EXPECT(c.mallocs == c.frees && c.double_frees == 0 && c.foreign_frees == 0 && c.overflows == 0 &&
             c.use_after_frees == 0,
         "counters: mallocs %llu frees %llu, reports %llu %llu %llu %llu", c.mallocs, c.frees, c.double_frees,
         c.foreign_frees, c.overflows, c.use_after_frees);
  std::printf("quarantine_full: ok\n");
  return 0;
}
