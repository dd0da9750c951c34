// CUDA's built-in device heap, passed through.
//
// libgpualloc sizes CUDA's own heap (cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE))
// instead of allocating an arena; this strategy only forwards. On the host,
// where there is no device heap, it forwards to the C library so the dispatch
// code stays the same for CPU tests.
#pragma once

#include <cstdint>
#include <cstdlib>

#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"

namespace gpualloc::strategies {

struct cuda_builtin {
  struct state {};

  static constexpr bool manages_arena = false;  // CUDA's heap holds the blocks
  static constexpr int init_phases = 0;

  GPUALLOC_HD static void init(state&, const arena&, int, std::uint64_t, std::uint64_t) {}

  GPUALLOC_HD static void* malloc(state&, const arena&, std::uint64_t bytes, const detail::lane_group&) {
#if GPUALLOC_ON_DEVICE
    return ::malloc(bytes);  // CUDA's device malloc: 16-byte aligned
#else
    return std::aligned_alloc(min_alignment, bytes);
#endif
  }

  GPUALLOC_HD static void free(state&, const arena&, void* p, const detail::lane_group&) {
#if GPUALLOC_ON_DEVICE
    ::free(p);
#else
    std::free(p);
#endif
  }
};

}  // namespace gpualloc::strategies
