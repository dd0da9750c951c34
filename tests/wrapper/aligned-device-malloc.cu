// REQUIRES: clang
// RUN: not %gpualloc-clangxx --cuda-device-only -S %s -o %t.ptx 2>&1 | FileCheck %s
// RUN: not %gpualloc-clangxx -g --cuda-device-only -S %s -o %t.ptx 2>&1 | FileCheck %s --check-prefix=DEBUG

// __nv_aligned_device_malloc is not supported (its memory is released with
// plain free, which cannot know the alignment): a clear compile error, not a
// silently wrong program. (CUDA's headers declare it for nvcc only; code
// written for nvcc and ported to clang declares it itself.) The error points
// at the call with -g, at the function without.
#include <cstddef>
extern "C" __device__ void* __nv_aligned_device_malloc(std::size_t size, std::size_t align);

// CHECK: aligned-device-malloc.cu:[[@LINE+1]]:{{[0-9]+}}: error: gpualloc does not support '__nv_aligned_device_malloc': its result is released with plain free()
__global__ void kernel(void** out) {
  // DEBUG: aligned-device-malloc.cu:[[@LINE+1]]:12: error: gpualloc does not support '__nv_aligned_device_malloc'
  out[0] = __nv_aligned_device_malloc(256, 64);
}
