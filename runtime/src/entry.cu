// The device entry points that gpualloc's compiler pass calls in place of
// malloc, free and every operator new/delete. This file is compiled to LLVM
// bitcode and linked into each device module by the pass; it only forwards
// to the allocation front end (allocate.h).
#include <cstddef>
#include <cstdio>

#include "gpualloc/allocate.h"

// The heap of the current context. libgpualloc writes it before the first
// kernel of this module runs in a context. Weak, so that several translation
// units linked with -fgpu-rdc share one.
extern "C" __device__ __attribute__((weak)) gpualloc::heap_header* __gpualloc_heap = nullptr;

namespace {

__device__ gpualloc::heap_header* current_heap() {
  gpualloc::heap_header* h = __gpualloc_heap;
  if (h == nullptr) {
    printf("gpualloc: device allocation before libgpualloc set up this module's heap; "
           "link with gpualloc-clang++ or LD_PRELOAD libgpualloc.so\n");
    __trap();
  }
  return h;
}

}  // namespace

extern "C" {

__device__ void* __gpualloc_malloc(std::size_t size) { return gpualloc::heap_malloc(current_heap(), size); }

__device__ void __gpualloc_free(void* p) {
  if (p != nullptr) gpualloc::heap_free(current_heap(), p);
}

__device__ void* __gpualloc_malloc_aligned(std::size_t size, std::size_t align) {
  return gpualloc::heap_malloc_aligned(current_heap(), size, align);
}

__device__ void __gpualloc_free_aligned(void* p, std::size_t align) {
  if (p != nullptr) gpualloc::heap_free_aligned(current_heap(), p, align);
}

}  // extern "C"
