// The device entry points that gpualloc's compiler pass calls in place of
// malloc, free and every operator new/delete (names in abi.h). They only
// forward to the allocation front end (allocate.h).
//
// Built once per strategy (runtime/CMakeLists.txt), with
//   GPUALLOC_RUNTIME_STRATEGY    the strategy's gpualloc::strategy_id enumerator;
//   GPUALLOC_RUNTIME_PIN_SYMBOL  (pinned build only) the marker global of a
//                                module compiled for this strategy alone.
// The pinned build is bitcode that the pass links and inlines into user code
// (gpualloc-clang++ --gpualloc-strategy); the other is the PTX that
// libgpualloc joins with an unpinned user module at load time.
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "gpualloc/abi.h"
#include "gpualloc/allocate.h"
#include "gpualloc/read_check.h"

#ifndef GPUALLOC_RUNTIME_STRATEGY
#error "build once per strategy: -DGPUALLOC_RUNTIME_STRATEGY=<gpualloc::strategy_id enumerator>"
#endif

// The heap of the current context. libgpualloc writes it before the first
// kernel of this module runs in a context. Weak: a module may hold runtime
// code twice (a pinned and an unpinned translation unit under -fgpu-rdc), and
// both must read the same heap.
extern "C" __device__ __attribute__((weak)) gpualloc::heap_header* __gpualloc_heap = nullptr;

// The ABI this runtime speaks; libgpualloc checks it before the first launch.
extern "C" __device__ __attribute__((weak, used)) const std::uint32_t __gpualloc_abi = gpualloc::abi::version;

#ifdef GPUALLOC_RUNTIME_PIN_SYMBOL
// This module was compiled for one strategy: libgpualloc refuses to run it
// under another.
extern "C" __device__ __attribute__((weak, used)) const std::uint32_t GPUALLOC_RUNTIME_PIN_SYMBOL =
    static_cast<std::uint32_t>(gpualloc::strategy_id::GPUALLOC_RUNTIME_STRATEGY);
#endif

namespace {

constexpr auto this_strategy = gpualloc::strategy_id::GPUALLOC_RUNTIME_STRATEGY;

// Set once a missing heap was reported, so a grid prints one line, not millions.
__device__ unsigned reported_missing_heap = 0;

// The heap, or null (after one message) when libgpualloc did not set up this
// module (the program runs without libgpualloc) or set it up with a heap of
// another gpualloc version. Allocations then return NULL and frees do nothing.
__device__ bool usable(const gpualloc::heap_header* h) { return h != nullptr && h->magic == gpualloc::heap_magic; }

__device__ void report_missing_heap(const gpualloc::heap_header* h) {
  if (atomicExch(&reported_missing_heap, 1u) == 0)
    printf(h == nullptr ? "gpualloc: device allocation in a module whose heap libgpualloc did not set up (link with "
                          "gpualloc-clang++ or LD_PRELOAD libgpualloc.so): malloc returns NULL\n"
                        : "gpualloc: this module's heap was made by another gpualloc version: malloc returns NULL\n");
}

__device__ gpualloc::heap_header* current_heap() {
  gpualloc::heap_header* h = __gpualloc_heap;
  if (usable(h)) [[likely]]
    return h;
  report_missing_heap(h);
  return nullptr;
}

// current_heap() for a free of p: null for free(NULL) too. The heap is
// checked before p is tested, so that its loads overlap the caller's load
// of p instead of following it; the empty asm keeps them on both paths.
// (2^20 frees on a fresh 16 GiB heap, H100, four rounds, two in each
// order: 0.95-0.99 of the time at every one of the README's ten points.)
__device__ gpualloc::heap_header* heap_to_free_into(const void* p) {
  gpualloc::heap_header* const h = __gpualloc_heap;
  const bool ready = usable(h);
  asm volatile("" ::"r"(static_cast<unsigned>(ready)));
  if (p == nullptr) return nullptr;
  if (ready) [[likely]]
    return h;
  report_missing_heap(h);
  return nullptr;
}

__device__ void* allocate(std::size_t size, gpualloc::coalescing how) {
  gpualloc::heap_header* h = current_heap();
  return h != nullptr ? gpualloc::heap_malloc(h, size, this_strategy, how) : nullptr;
}

__device__ void deallocate(void* p, gpualloc::coalescing how) {
  if (gpualloc::heap_header* h = heap_to_free_into(p)) gpualloc::heap_free(h, p, this_strategy, how);
}

__device__ void* allocate_aligned(std::size_t size, std::size_t align, gpualloc::coalescing how) {
  gpualloc::heap_header* h = current_heap();
  return h != nullptr ? gpualloc::heap_malloc_aligned(h, size, align, this_strategy, how) : nullptr;
}

__device__ void deallocate_aligned(void* p, std::size_t align, gpualloc::coalescing how) {
  if (gpualloc::heap_header* h = heap_to_free_into(p)) gpualloc::heap_free_aligned(h, p, align, this_strategy, how);
}

}  // namespace

extern "C" {

using gpualloc::coalescing;

__device__ void* __gpualloc_malloc(std::size_t size) { return allocate(size, coalescing::by_size); }
__device__ void* __gpualloc_malloc_same_size(std::size_t size) { return allocate(size, coalescing::same_size); }
__device__ void* __gpualloc_malloc_lane(std::size_t size) { return allocate(size, coalescing::none); }
__device__ void __gpualloc_free(void* p) { deallocate(p, coalescing::by_size); }
__device__ void __gpualloc_free_lane(void* p) { deallocate(p, coalescing::none); }

__device__ void* __gpualloc_malloc_aligned(std::size_t size, std::size_t align) {
  return allocate_aligned(size, align, coalescing::by_size);
}
__device__ void* __gpualloc_malloc_aligned_lane(std::size_t size, std::size_t align) {
  return allocate_aligned(size, align, coalescing::none);
}
__device__ void __gpualloc_free_aligned(void* p, std::size_t align) { deallocate_aligned(p, align, coalescing::by_size); }
__device__ void __gpualloc_free_aligned_lane(void* p, std::size_t align) {
  deallocate_aligned(p, align, coalescing::none);
}

// A load saw only poison or zone bytes (code compiled with
// --gpualloc-check-reads). Quiet without a checked heap: the same code
// runs unchecked. Out of line: the pass calls it from every load's rare
// path, and a pinned build inlines every other entry point.
__device__ __attribute__((noinline)) void __gpualloc_check_read(const void* p, std::size_t size) {
  gpualloc::heap_header* h = __gpualloc_heap;
  if (h == nullptr || h->magic != gpualloc::heap_magic || !(h->flags & gpualloc::heap_flag_checked)) return;
  const gpualloc::arena blocks =
      gpualloc::detail::blocks_in_arena(this_strategy) ? h->space : gpualloc::checked::blocks_outside(h);
  gpualloc::checked::check_read(h, blocks, p, size);
}

}  // extern "C"
