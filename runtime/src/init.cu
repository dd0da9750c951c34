// libgpualloc's own device code: the strategies' init phases, run when a
// heap is created (and again by gpualloc_reset), and checked mode's walks
// over the heap (walks.h), run after the program's kernels. Compiled by the same clang
// as the entry points (entry.cu), from the same headers, so init and malloc
// read one layout; runtime/CMakeLists.txt makes it a fatbin (SASS for the
// GPUALLOC_INIT_KERNEL_ARCHS, PTX for newer GPUs) that libgpualloc embeds.
//
// One launch per phase, with the shape the strategy asks for
// (strategy_traits::init_shape); thread t of T does its share.
#include <cstdint>

#include "gpualloc/dispatch.h"
#include "gpualloc/walks.h"

extern "C" __global__ void __gpualloc_init(gpualloc::heap_header* h, int phase) {
  const std::uint64_t threads = std::uint64_t(gridDim.x) * blockDim.x;
  const std::uint64_t thread = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  gpualloc::init_strategy(h, phase, thread, threads);
}

extern "C" __global__ void __gpualloc_walk(gpualloc::heap_header* h, int task) {
  const std::uint64_t threads = std::uint64_t(gridDim.x) * blockDim.x;
  const std::uint64_t thread = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  gpualloc::checked::walk_heap(h, static_cast<gpualloc::checked::walk>(task), thread, threads);
}
