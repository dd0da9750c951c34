// The allocation front end shared by every strategy: size rounding, warp
// coalescing, the optional tracking header, statistics, checked mode,
// aligned requests.
//
// Contract (as CUDA's device malloc, and the README's):
//  - every pointer is 16-byte aligned; heap_malloc_aligned honours larger powers of two;
//  - a request that cannot be served returns NULL and changes nothing;
//  - malloc(0) returns a unique pointer to a 16-byte block, to be freed as usual;
//  - free(NULL) is a no-op.
//
// Coalescing: the lanes of a warp that call together form one lane_group,
// so a strategy can serve them with one atomic. The call site chooses how
// (`coalescing`): by size (lanes may ask for different sizes), same size
// (the compiler proved the size warp-uniform), or none; the heap flag
// heap_flag_no_coalesce (GPUALLOC_COALESCE=0) turns it off at run time.
// The group is formed before anything else, while the lanes are together.
//
// Tracking header: with statistics on, each block starts with a 16-byte
// block_header (the requested size and a live/freed tag) in front of the
// pointer the program sees; in checked mode with a sealed header and red
// zones instead (checked.h), a bit in the map of live blocks (live_map.h)
// and, once freed, a stay in the quarantine (quarantine.h) before the
// strategy gets the block back. Both switches are fixed per heap at init.
#pragma once

#include <cstdint>
#include <cstdio>

#include "gpualloc/checked.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/dispatch.h"
#include "gpualloc/heap.h"
#include "gpualloc/live_map.h"
#include "gpualloc/quarantine.h"
#include "gpualloc/read_check.h"

namespace gpualloc {

// A request no heap can serve; strategies see it as larger than their arena.
// Small enough that a warp's sum of them cannot overflow 64 bits.
inline constexpr std::uint64_t impossible_request = std::uint64_t{1} << 56;

enum class coalescing : std::uint8_t {
  by_size,    // the active lanes together; they may ask for different sizes
  same_size,  // the active lanes together, all asking for the same size
  none,       // each lane alone
};

struct block_header {
  std::uint64_t requested;  // bytes the program asked for
  std::uint32_t tag;        // block_live or block_freed
  std::uint32_t reserved;
};
static_assert(sizeof(block_header) == min_alignment, "the header keeps user pointers 16-byte aligned");
static_assert(checked::front_bytes % min_alignment == 0, "so does checked mode's");

namespace detail {

GPUALLOC_INLINE bool tracks_blocks(const heap_header* h) {
  return (h->flags & (heap_flag_stats | heap_flag_checked)) != 0;
}

// The lanes that call the strategy together. Call before the lanes diverge.
GPUALLOC_INLINE lane_group form_group(const heap_header* h, coalescing how) {
  if (how == coalescing::none || (h->flags & heap_flag_no_coalesce)) return lane_group::single();
  return how == coalescing::same_size ? lane_group::coalesced_same_size() : lane_group::coalesced();
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

// Whether the strategy's blocks lie in the heap's arena (all but `cuda`'s).
GPUALLOC_INLINE bool blocks_in_arena(strategy_id strategy) {
  return visit_strategy(strategy, [](auto tag) { return strategy_traits<typename decltype(tag)::type>::manages_arena; });
}

// Whether `p` may be a block of this heap: in the arena (or anywhere, for a
// strategy whose blocks live outside it) and 16-byte aligned.
GPUALLOC_INLINE bool may_be_block(const heap_header* h, strategy_id strategy, const void* p) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(p) % min_alignment == 0;
  return aligned && (!blocks_in_arena(strategy) || h->space.contains(p));
}

// Whether a block of `bytes` could come from the heap at all: no larger
// than its arena (any possible request, for a strategy outside it).
// Checked mode drains the quarantine only for such a request.
GPUALLOC_INLINE bool may_fit(const heap_header* h, strategy_id strategy, std::uint64_t bytes) {
  return bytes < impossible_request && (!blocks_in_arena(strategy) || bytes <= h->space.bytes);
}

// With statistics or checked mode: the block the strategy handed out
// (nullptr: none) made the program's, its header (and zones) written and
// counted; returns the program's pointer.
GPUALLOC_INLINE void* hand_out_tracked(heap_header* h, strategy_id strategy, void* block, std::uint64_t size) {
  heap_counters& c = h->counters;
  count(c.mallocs, block != nullptr);
  count(c.failed_mallocs, block == nullptr);
  if (block == nullptr) return nullptr;
  if (h->flags & heap_flag_stats) {
    std::uint64_t now = device_atomic<std::uint64_t>(c.bytes_in_use).fetch_add(size, relaxed) + size;
    device_atomic<std::uint64_t>(c.peak_bytes).fetch_max(now, relaxed);
  }
  if (h->flags & heap_flag_checked) {
    void* user = checked::make_block(block, size, checked::here(h));
    checked::mark_live(h, block);
    if (!blocks_in_arena(strategy)) checked::note_block_outside(h, block, checked::block_bytes(size));
    return user;
  }
  auto* header = static_cast<block_header*>(block);
  header->requested = size;
  device_atomic<std::uint32_t>(header->tag).store(block_live, relaxed);
  return header + 1;
}

// Checked mode's free of p, up to the quarantine: true if p is a live
// block, now freed (its header's freeing place recorded, its bit in the
// live map cleared, its bytes poisoned); false, reported and counted, if it
// is not (checked.h C1, C2). Damaged red zones are reported and counted,
// and the block is freed all the same.
GPUALLOC_INLINE bool checked_release(heap_header* h, strategy_id strategy, void* p, const checked::place& at,
                                     std::uint64_t* released) {
  checked::checked_header* header = checked::header_of(p);
  checked::checked_header fields;
  if (!may_be_block(h, strategy, header) || !checked::sealed(header, &fields)) {
    report_bad_free("free of a pointer this heap never handed out", p);
    count(h->counters.foreign_frees, 1);
    return false;
  }
  // acq_rel: the free happens after every write the owner made to the block.
  std::uint32_t expected = block_live;
  if (!device_atomic<std::uint32_t>(header->tag).compare_exchange_strong(expected, block_freed, acq_rel)) {
    const bool twice = expected == block_freed || expected == block_released;
    report_bad_free(twice ? "double free" : "free of a pointer this heap never handed out", p);
    count(twice ? h->counters.double_frees : h->counters.foreign_frees, 1);
    return false;
  }
  checked::record_free(header, at);
  checked::mark_dead(h, header);
  checked::check_zones(h, header, fields, checked::finder::free, at);
  checked::poison(p, fields.requested);
  *released = fields.requested;
  return true;
}

// The paths that only a checked heap takes, out of line. A module that
// libgpualloc joins for unchecked heaps has a trap in place of their
// bodies (abi::checked_only_namespace): ptxas gives a kernel the registers
// of the deepest chain of calls it may make, and the drain's second malloc
// alone cost sm-slab's benchmark kernels 10 registers and divisors'
// collect 6 (134 against 128: one block of 256 an SM instead of two, and
// 2.01 ms against 1.17; H100).
namespace checked_only {

// Checked mode's free of the program's pointer p (checked_release, then the
// quarantine): false for a bad free (reported and counted); else true, with
// the bytes the program asked for in *released and in *block the block to
// give back to the strategy, or nullptr when the quarantine pushed out none.
// Here, not in take_back_tracked: with it there, sm-slab's free kernel took
// 64 registers instead of 32 on heaps without checked mode (ptxas 13.0,
// sm_90, the joined benchmark module).
GPUALLOC_HD __attribute__((noinline)) inline bool take_back_checked(heap_header* h, strategy_id strategy, void* p,
                                                                  void** block, std::uint64_t* released) {
  const checked::place at = checked::here(h);
  if (!checked_release(h, strategy, p, at, released)) return false;
  *block = checked::enter_quarantine(h, checked::header_of(p));
  if (*block != nullptr) {
    checked::check_freed_block(h, static_cast<checked::checked_header*>(*block), checked::finder::eviction, at);
    checked::release_to_strategy(static_cast<checked::checked_header*>(*block));
  }
  return true;
}

// A block drained from the quarantine, back to strategy S. Out of line:
// inlined into the drain's loop, the CMalloc family's free took 11
// registers more in the kernels that allocate (wrapper/register-parity.test).
template <class S>
GPUALLOC_HD __attribute__((noinline)) void give_back_drained(heap_header* h, void* block) {
  S::free(state_of<typename S::state>(h), h->space, block, lane_group::single());
}

// Checked mode, after strategy S could not serve `bytes` for a request of
// `size`: drains the quarantine, or helps the drain under way (quarantine.h
// Q3; every block checked and given back to S), asks once more, alone, and
// hands out what it gets (as hand_out_tracked). Out of line: a rare path. A
// template, so a module holds only its own strategy's code.
template <class S>
GPUALLOC_HD __attribute__((noinline)) void* retry_after_drain(heap_header* h, strategy_id strategy, std::uint64_t bytes,
                                                             std::uint64_t size) {
  checked::drain_quarantine(h, [h](checked::checked_header* out) { give_back_drained<S>(h, out); });
  return hand_out_tracked(h, strategy,
                          S::malloc(state_of<typename S::state>(h), h->space, bytes, lane_group::single()), size);
}

}  // namespace checked_only

// With statistics or checked mode: the free of the program's pointer p
// checked (checked mode) and counted; returns the block to give back to the
// strategy, or nullptr when there is none (a bad free, reported, or in
// checked mode a quarantine that pushed out no block). Out of line, so that
// the strategy's free has one call site and the unchecked paths of every
// kernel that frees keep their registers (wrapper/register-parity.test:
// with this inlined, Ouroboros-C-VA's thrust_sort kernel was 8 registers
// over its folded build; with hand_out_tracked out of line too, cfmalloc's
// was).
GPUALLOC_HD __attribute__((noinline)) inline void* take_back_tracked(heap_header* h, strategy_id strategy, void* p) {
  void* block;
  std::uint64_t released = 0;  // the bytes the program asked for
  if (h->flags & heap_flag_checked) {
    if (!checked_only::take_back_checked(h, strategy, p, &block, &released)) return nullptr;
  } else {
    // Statistics only: no checks. acq_rel: the free happens after every write the owner made to the block.
    auto* header = static_cast<block_header*>(p) - 1;
    std::uint32_t expected = block_live;
    device_atomic<std::uint32_t>(header->tag).compare_exchange_strong(expected, block_freed, acq_rel);
    released = header->requested;
    block = header;
  }
  count(h->counters.frees, 1);
  if (h->flags & heap_flag_stats) device_atomic<std::uint64_t>(h->counters.bytes_in_use).fetch_sub(released, relaxed);
  return block;
}

}  // namespace detail

// `strategy` is a compile-time constant in every runtime build (one build per
// strategy), so the dispatch folds away.
GPUALLOC_INLINE void* heap_malloc(heap_header* h, std::uint64_t size, strategy_id strategy, coalescing how) {
  const detail::lane_group group = detail::form_group(h, how);
  const bool tracked = detail::tracks_blocks(h);
  const bool checked = h->flags & heap_flag_checked;
  const std::uint64_t overhead = tracked ? sizeof(block_header) : 0;
  const std::uint64_t bytes = size >= impossible_request / 2 ? impossible_request
                              : checked ? checked::block_bytes(size)
                                        : round_up(size == 0 ? 1 : size, min_alignment) + overhead;

  void* block = visit_strategy(strategy, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return S::malloc(state_of<typename S::state>(h), h->space, bytes, group);
  });
  if (!tracked) return block;
  if (block == nullptr && checked && detail::may_fit(h, strategy, bytes))
    return visit_strategy(strategy, [&](auto tag) {
      return detail::checked_only::retry_after_drain<typename decltype(tag)::type>(h, strategy, bytes, size);
    });
  return detail::hand_out_tracked(h, strategy, block, size);
}

// In checked mode a free that is not valid (foreign pointer, double free) is
// reported and skipped, and so is one that pushed no block out of the
// quarantine; a lane that pushed one out frees that one, alone: which lanes
// get this far depends on the ring, and the blocks they free are old ones
// that no longer belong together (the host's warp emulation, which cannot
// see lanes leave, relies on it too: tests/host/strategies/warp_tests.cpp).
GPUALLOC_INLINE void heap_free(heap_header* h, void* p, strategy_id strategy, coalescing how) {
  if (p == nullptr) return;
  void* block = p;  // what the strategy handed out
  if (detail::tracks_blocks(h) && (block = detail::take_back_tracked(h, strategy, p)) == nullptr) return;
  const detail::lane_group group =
      h->flags & heap_flag_checked ? detail::lane_group::single() : detail::form_group(h, how);
  visit_strategy(strategy, [&](auto tag) {
    using S = typename decltype(tag)::type;
    S::free(state_of<typename S::state>(h), h->space, block, group);
  });
}

// Alignment above 16: over-allocate by `align` and store the distance back to
// the block in the 8 bytes below the aligned pointer. Only heap_free_aligned
// (aligned operator delete) may free such a pointer.
GPUALLOC_INLINE void* heap_malloc_aligned(heap_header* h, std::uint64_t size, std::uint64_t align, strategy_id strategy,
                                          coalescing how) {
  if (align <= min_alignment) return heap_malloc(h, size, strategy, how);
  const bool valid_align = (align & (align - 1)) == 0 && align < impossible_request;
  auto* block = static_cast<std::byte*>(heap_malloc(
      h, valid_align && size < impossible_request ? size + align : impossible_request, strategy,
      how == coalescing::none ? how : coalescing::by_size));
  if (block == nullptr) return nullptr;
  auto aligned = (reinterpret_cast<std::uintptr_t>(block) + min_alignment + align - 1) & ~(std::uintptr_t)(align - 1);
  reinterpret_cast<std::uint64_t*>(aligned)[-1] = aligned - reinterpret_cast<std::uintptr_t>(block);
  return reinterpret_cast<void*>(aligned);
}

GPUALLOC_INLINE void heap_free_aligned(heap_header* h, void* p, std::uint64_t align, strategy_id strategy,
                                       coalescing how) {
  if (p == nullptr || align <= min_alignment) return heap_free(h, p, strategy, how);
  // Checked mode reads the distance only from a pointer that may lie in the
  // heap, and frees only a block it points back to.
  const bool checked = h->flags & heap_flag_checked;
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (checked && (address % 8 != 0 || !detail::may_be_block(h, strategy, reinterpret_cast<void*>(address & ~std::uintptr_t{15})))) {
    detail::report_bad_free("aligned delete of a pointer this heap never handed out", p);
    detail::count(h->counters.foreign_frees, 1);
    return;
  }
  const std::uint64_t distance = static_cast<std::uint64_t*>(p)[-1];
  if (checked && (distance < min_alignment || distance > align + min_alignment || distance > address ||
                  (address - distance) % min_alignment != 0)) {
    detail::report_bad_free("aligned delete of a pointer this heap never handed out", p);
    detail::count(h->counters.foreign_frees, 1);
    return;
  }
  heap_free(h, static_cast<std::byte*>(p) - distance, strategy, how);
}

// The same, with the heap's own strategy, coalesced by size (host tests, init-time code).
GPUALLOC_INLINE void* heap_malloc(heap_header* h, std::uint64_t size) {
  return heap_malloc(h, size, static_cast<strategy_id>(h->strategy), coalescing::by_size);
}
GPUALLOC_INLINE void heap_free(heap_header* h, void* p) {
  heap_free(h, p, static_cast<strategy_id>(h->strategy), coalescing::by_size);
}

}  // namespace gpualloc
