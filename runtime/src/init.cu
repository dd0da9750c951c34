// libgpualloc's own device code: the strategies' init phases, run when a
// heap is created (and again by gpualloc_reset). Compiled by the same clang
// as the entry points (entry.cu), from the same headers, so init and malloc
// read one layout; runtime/CMakeLists.txt makes it a fatbin (SASS for the
// GPUALLOC_INIT_KERNEL_ARCHS, PTX for newer GPUs) that libgpualloc embeds.
//
// One launch per phase, with the shape the strategy asks for
// (strategy_traits::init_shape); thread t of T does its share.
#include <cstdint>

#include "gpualloc/dispatch.h"

extern "C" __global__ void __gpualloc_init(gpualloc::heap_header* h, int phase) {
  const std::uint64_t threads = std::uint64_t(gridDim.x) * blockDim.x;
  const std::uint64_t thread = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  gpualloc::init_strategy(h, phase, thread, threads);
}
