// libgpualloc's own device code: the strategies' init, run once per heap
// (and again by gpualloc_reset). Compiled by nvcc to a fatbin (SASS for each
// of GPUALLOC_INIT_KERNEL_ARCHS, PTX of the highest) that embed.S places in
// libgpualloc.so; context_heaps.cpp loads it with the real cuModuleLoadData.
//
// One launch per init phase, each a grid-stride pass: thread t of T does its
// share of gpualloc::init_strategy(h, phase, t, T).
#include <cstdint>

#include "gpualloc/dispatch.h"

extern "C" __global__ void __gpualloc_init_kernel(gpualloc::heap_header* h, int phase) {
  const std::uint64_t threads = std::uint64_t(gridDim.x) * blockDim.x;
  const std::uint64_t thread = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  gpualloc::init_strategy(h, phase, thread, threads);
}
