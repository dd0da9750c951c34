// The device entry points that gpualloc's compiler pass calls in place of
// malloc, free and every operator new/delete. This file is compiled to LLVM
// bitcode and linked into each device module by the pass; it only forwards
// to the allocation front end (allocate.h).
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "gpualloc/allocate.h"

// The heap of the current context. libgpualloc writes it before the first
// kernel of this module runs in a context. Weak, so that several translation
// units linked with -fgpu-rdc share one.
extern "C" __device__ __attribute__((weak)) gpualloc::heap_header* __gpualloc_heap = nullptr;

// The strategy this module was compiled for, or `unpinned`. The compiler pass
// turns it into a constant when gpualloc-clang++ gets --gpualloc-strategy, so
// the dispatch folds to one strategy (fewer registers); libgpualloc refuses
// to run such a module under another GPUALLOC_STRATEGY. Weak, so that this
// file's own optimisation cannot fold the default.
inline constexpr std::uint32_t unpinned = 0xffffffffu;
extern "C" __device__ __attribute__((weak)) std::uint32_t __gpualloc_pinned_strategy = unpinned;

namespace {

__device__ gpualloc::strategy_id strategy_of(const gpualloc::heap_header* h) {
  std::uint32_t pinned = __gpualloc_pinned_strategy;
  return static_cast<gpualloc::strategy_id>(pinned != unpinned ? pinned : h->strategy);
}

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

__device__ void* __gpualloc_malloc(std::size_t size) {
  gpualloc::heap_header* h = current_heap();
  return gpualloc::heap_malloc(h, size, strategy_of(h));
}

__device__ void __gpualloc_free(void* p) {
  if (p == nullptr) return;
  gpualloc::heap_header* h = current_heap();
  gpualloc::heap_free(h, p, strategy_of(h));
}

__device__ void* __gpualloc_malloc_aligned(std::size_t size, std::size_t align) {
  gpualloc::heap_header* h = current_heap();
  return gpualloc::heap_malloc_aligned(h, size, align, strategy_of(h));
}

__device__ void __gpualloc_free_aligned(void* p, std::size_t align) {
  if (p == nullptr) return;
  gpualloc::heap_header* h = current_heap();
  gpualloc::heap_free_aligned(h, p, align, strategy_of(h));
}

}  // extern "C"
