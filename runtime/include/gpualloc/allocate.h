// The allocation front end shared by every strategy: size rounding, the
// optional tracking header, statistics, checked mode, aligned requests.
//
// Contract (as CUDA's device malloc, and the README's):
//  - every pointer is 16-byte aligned; heap_malloc_aligned honours larger powers of two;
//  - a request that cannot be served returns NULL and changes nothing;
//  - malloc(0) returns a unique pointer to a 16-byte block, to be freed as usual;
//  - free(NULL) is a no-op.
//
// Tracking header: with statistics or checked mode on, each block starts with
// a 16-byte block_header (the requested size and a live/freed tag) in front
// of the pointer the program sees. Both switches are fixed per heap at init.
//
// Lanes are coalesced here: the active lanes of a warp call the strategy as
// one lane_group, so a strategy can serve a warp with one atomic.
#pragma once

#include <cstdint>
#include <cstdio>

#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/dispatch.h"
#include "gpualloc/heap.h"

namespace gpualloc {

// A request no heap can serve; strategies see it as larger than their arena.
// Small enough that a warp's sum of them cannot overflow 64 bits.
inline constexpr std::uint64_t impossible_request = std::uint64_t{1} << 56;

struct block_header {
  std::uint64_t requested;  // bytes the program asked for
  std::uint32_t tag;        // block_live or block_freed
  std::uint32_t reserved;
};
static_assert(sizeof(block_header) == min_alignment, "the header keeps user pointers 16-byte aligned");

inline constexpr std::uint32_t block_live = 0x6576696cu;   // "live"
inline constexpr std::uint32_t block_freed = 0x65657266u;  // "free"

namespace detail {

GPUALLOC_INLINE bool tracks_blocks(const heap_header* h) {
  return (h->flags & (heap_flag_stats | heap_flag_checked)) != 0;
}

// Adds `v` to a statistics counter. Per lane, not per group: the lanes of a
// group may leave the strategy by different paths, and counting must not
// depend on their reconverging (the GPU's compiler aggregates same-address
// atomics of a warp anyway).
GPUALLOC_INLINE void count(std::uint64_t& counter, std::uint64_t v) {
  if (v != 0) device_atomic<std::uint64_t>(counter).fetch_add(v, relaxed);
}

GPUALLOC_INLINE void report_bad_free(const char* what, const void* p) {
#if GPUALLOC_ON_DEVICE
  printf("gpualloc: %s of %p by block (%u,%u,%u) thread (%u,%u,%u)\n", what, p, blockIdx.x, blockIdx.y, blockIdx.z,
         threadIdx.x, threadIdx.y, threadIdx.z);
#else
  std::fprintf(stderr, "gpualloc: %s of %p\n", what, p);
#endif
}

}  // namespace detail

// `strategy` is the heap's own (h->strategy) unless the module was compiled
// with its strategy pinned (gpualloc-clang++ --gpualloc-strategy), in which
// case it is a compile-time constant and the dispatch folds away.
GPUALLOC_INLINE void* heap_malloc(heap_header* h, std::uint64_t size, strategy_id strategy) {
  const detail::lane_group group = detail::lane_group::coalesced();
  const bool tracked = detail::tracks_blocks(h);
  const std::uint64_t overhead = tracked ? sizeof(block_header) : 0;
  const std::uint64_t bytes =
      size >= impossible_request / 2 ? impossible_request : round_up(size == 0 ? 1 : size, min_alignment) + overhead;

  void* block = visit_strategy(strategy, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return S::malloc(state_of<typename S::state>(h), h->space, bytes, group);
  });

  if (!tracked) return block;
  if (block != nullptr) {
    auto* header = static_cast<block_header*>(block);
    header->requested = size;
    detail::device_atomic<std::uint32_t>(header->tag).store(block_live, detail::relaxed);
  }
  heap_counters& c = h->counters;
  detail::count(c.mallocs, block != nullptr);
  detail::count(c.failed_mallocs, block == nullptr);
  if ((h->flags & heap_flag_stats) && block != nullptr) {
    std::uint64_t now = detail::device_atomic<std::uint64_t>(c.bytes_in_use).fetch_add(size, detail::relaxed) + size;
    detail::device_atomic<std::uint64_t>(c.peak_bytes).fetch_max(now, detail::relaxed);
  }
  return block != nullptr ? static_cast<std::byte*>(block) + sizeof(block_header) : nullptr;
}

GPUALLOC_INLINE void heap_free(heap_header* h, void* p, strategy_id strategy) {
  if (p == nullptr) return;
  const detail::lane_group group = detail::lane_group::coalesced();
  const bool tracked = detail::tracks_blocks(h);
  void* block = p;
  std::uint64_t released = 0;
  bool valid = true;

  if (tracked) {
    auto* header = reinterpret_cast<block_header*>(static_cast<std::byte*>(p) - sizeof(block_header));
    block = header;
    const bool checked = h->flags & heap_flag_checked;
    // The cuda strategy's blocks live in CUDA's heap, outside our arena.
    const bool in_heap = strategy == strategy_id::cuda || h->space.contains(header);
    const bool aligned = reinterpret_cast<std::uintptr_t>(p) % min_alignment == 0;
    if (checked && !(in_heap && aligned)) {
      valid = false;
      detail::report_bad_free("free of a pointer this heap never handed out", p);
      detail::device_atomic<std::uint64_t>(h->counters.foreign_frees).fetch_add(1, detail::relaxed);
    } else {
      // acq_rel: the free happens after every write the owner made to the block.
      std::uint32_t expected = block_live;
      if (!detail::device_atomic<std::uint32_t>(header->tag).compare_exchange_strong(expected, block_freed, detail::acq_rel)) {
        if (checked) {
          valid = false;
          bool twice = expected == block_freed;
          detail::report_bad_free(twice ? "double free" : "free of a pointer this heap never handed out", p);
          detail::device_atomic<std::uint64_t>(twice ? h->counters.double_frees : h->counters.foreign_frees)
              .fetch_add(1, detail::relaxed);
        }
      }
      released = header->requested;
    }
  }

  if (valid) {
    visit_strategy(strategy, [&](auto tag) {
      using S = typename decltype(tag)::type;
      S::free(state_of<typename S::state>(h), h->space, block, group);
    });
  }
  if (!tracked) return;
  detail::count(h->counters.frees, valid);
  if ((h->flags & heap_flag_stats) && valid)
    detail::device_atomic<std::uint64_t>(h->counters.bytes_in_use).fetch_sub(released, detail::relaxed);
}

// Alignment above 16: over-allocate by `align` and store the distance back to
// the block in the 8 bytes below the aligned pointer. Only heap_free_aligned
// (aligned operator delete) may free such a pointer.
GPUALLOC_INLINE void* heap_malloc_aligned(heap_header* h, std::uint64_t size, std::uint64_t align, strategy_id strategy) {
  if (align <= min_alignment) return heap_malloc(h, size, strategy);
  const bool valid_align = (align & (align - 1)) == 0 && align < impossible_request;
  auto* block = static_cast<std::byte*>(
      heap_malloc(h, valid_align && size < impossible_request ? size + align : impossible_request, strategy));
  if (block == nullptr) return nullptr;
  auto aligned = (reinterpret_cast<std::uintptr_t>(block) + min_alignment + align - 1) & ~(std::uintptr_t)(align - 1);
  reinterpret_cast<std::uint64_t*>(aligned)[-1] = aligned - reinterpret_cast<std::uintptr_t>(block);
  return reinterpret_cast<void*>(aligned);
}

GPUALLOC_INLINE void heap_free_aligned(heap_header* h, void* p, std::uint64_t align, strategy_id strategy) {
  if (p == nullptr || align <= min_alignment) return heap_free(h, p, strategy);
  std::uint64_t distance = static_cast<std::uint64_t*>(p)[-1];
  heap_free(h, static_cast<std::byte*>(p) - distance, strategy);
}

// The same, with the heap's own strategy (host tests, init-time code).
GPUALLOC_INLINE void* heap_malloc(heap_header* h, std::uint64_t size) {
  return heap_malloc(h, size, static_cast<strategy_id>(h->strategy));
}
GPUALLOC_INLINE void heap_free(heap_header* h, void* p) { heap_free(h, p, static_cast<strategy_id>(h->strategy)); }

}  // namespace gpualloc
