// The heap size comes from GPUALLOC_HEAP_SIZE, else from the program's own
// cudaDeviceSetLimit(cudaLimitMallocHeapSize), and cudaDeviceGetLimit reports
// it. The program then takes 64 KiB blocks until the heap says NULL (the
// wrapping atomic-wrap never does, so it is only checked for not failing).
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_STRATEGY=atomic %gpu-bin/set_limit | FileCheck %s --check-prefix=PROGRAM
// RUN: env GPUALLOC_STRATEGY=atomic GPUALLOC_HEAP_SIZE=1G %gpu-bin/set_limit | FileCheck %s --check-prefix=ENV
// RUN: %for-each-strategy -- %gpu-bin/set_limit
// PROGRAM: heap limit 268435456 bytes
// PROGRAM: served 409{{[0-5]}} blocks of 64 KiB
// ENV: heap limit 1073741824 bytes
// ENV: served 1638{{[0-3]}} blocks of 64 KiB
#include <cstdio>
#include <cstdlib>

#include "Inputs/check.h"
#include "gpualloc/registry.h"

__global__ void take_all(void** blocks, int per_thread, unsigned* served) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < per_thread; ++i) {
    void* p = malloc(64 << 10);
    blocks[t * per_thread + i] = p;
    if (p == nullptr) break;
    static_cast<char*>(p)[0] = 1;
    atomicAdd(served, 1u);
  }
}

__global__ void give_back(void** blocks, int count) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) free(blocks[i]);
}

int main() {
  CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, size_t{256} << 20));
  size_t limit = 0;
  CHECK(cudaDeviceGetLimit(&limit, cudaLimitMallocHeapSize));
  std::printf("heap limit %zu bytes\n", limit);

  const int threads = 256, per_thread = 128;  // room for 2 GiB of requests
  void** blocks;
  unsigned* served;
  CHECK(cudaMalloc(&blocks, threads * per_thread * sizeof(void*)));
  CHECK(cudaMemset(blocks, 0, threads * per_thread * sizeof(void*)));
  CHECK(cudaMallocManaged(&served, sizeof(unsigned)));
  *served = 0;
  take_all<<<threads / 64, 64>>>(blocks, per_thread, served);
  SYNC_CHECK();
  std::printf("served %u blocks of 64 KiB\n", *served);
  const char* name = std::getenv("GPUALLOC_STRATEGY");
  const gpualloc::strategy_info* strategy = gpualloc::find_strategy(name ? name : "");
  bool wraps = strategy != nullptr && strategy->reuse == gpualloc::reuse_policy::unsafe;
  EXPECT(*served > 0 && (wraps || (size_t)*served << 16 <= limit), "served %u blocks of 64 KiB from a %zu-byte heap",
         *served, limit);
  give_back<<<8, 64>>>(blocks, threads * per_thread);
  SYNC_CHECK();
  return 0;
}
