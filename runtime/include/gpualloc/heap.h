// The heap of one context, as it lies in device memory.
//
//   [ heap_header | checked region | padding to arena_alignment | arena ...... ]
//
// The checked region exists only in checked mode (GPUALLOC_CHECK): the names
// of the kernels that ran, the result of the last walk over the heap, the
// quarantine of freed blocks and the map of live blocks (checked.h,
// walks.h, quarantine.h, live_map.h). A strategy without an arena
// (`cuda`) gets the header and that region only.
//
// libgpualloc allocates one heap per context, fills in the header, and runs
// the strategy's init over the arena. Every module that contains the runtime
// holds a pointer to the header in its `__gpualloc_heap` variable. All
// strategy state lives in the header's `strategy_state` bytes or in the arena
// itself, never in fixed __device__ variables, so several contexts, devices
// and resets work.
//
// The layout is shared by the device runtime (clang bitcode), the init kernels
// of libgpualloc (nvcc) and host code: plain standard-layout types only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpualloc/abi.h"
#include "gpualloc/config.h"

namespace gpualloc {

// "gpa" and the ABI version digit (abi.h): a heap laid out by another
// gpualloc version is refused on the device instead of misread.
inline constexpr std::uint32_t heap_magic = 0x67706130u + abi::version;
inline constexpr std::size_t min_alignment = 16;           // of every pointer handed out
inline constexpr std::size_t arena_alignment = 4096;       // of the arena's start
inline constexpr std::size_t strategy_state_bytes = 4096;  // room for a strategy's fixed state

enum heap_flags : std::uint32_t {
  heap_flag_stats = 1u << 0,    // count allocations and bytes (GPUALLOC_STATS)
  heap_flag_checked = 1u << 1,  // detect bad frees and overflows (GPUALLOC_CHECK, checked.h)
  heap_flag_no_coalesce = 1u << 2,  // every lane calls the strategy alone (GPUALLOC_COALESCE=0)
};

// Event counters, updated with relaxed device-scope atomics only when
// heap_flag_stats or heap_flag_checked is set. Read by the host after a
// synchronisation.
struct heap_counters {
  std::uint64_t mallocs;         // successful allocations
  std::uint64_t frees;           // frees of non-NULL pointers
  std::uint64_t failed_mallocs;  // allocations that returned NULL
  std::uint64_t bytes_in_use;    // requested bytes of live allocations (stats mode)
  std::uint64_t peak_bytes;      // maximum of bytes_in_use
  std::uint64_t double_frees;    // checked mode
  std::uint64_t foreign_frees;   // checked mode: pointers this heap never handed out
  std::uint64_t overflows;       // checked mode: red zones found written (checked.h) or read (read_check.h)
  std::uint64_t use_after_frees;  // checked mode: freed blocks found written (quarantine.h) or read (read_check.h)
};

// A region of device memory a strategy manages.
struct arena {
  std::byte* begin;
  std::uint64_t bytes;

  GPUALLOC_HD bool contains(const void* p) const {
    auto* b = static_cast<const std::byte*>(p);
    return b >= begin && b < begin + bytes;
  }
};

// Checked mode's bookkeeping, laid out by lay_out_heap and zeroed before
// the heap is first used; all pointers null without checked mode.
inline constexpr std::uint32_t kernel_name_slots = 256;  // slot 0: a kernel the host did not name
inline constexpr std::uint32_t kernel_name_bytes = 128;  // each, its terminating zero included
inline constexpr std::uint64_t most_quarantine_slots = std::uint64_t{1} << 16;
inline constexpr std::uint64_t heap_bytes_per_quarantine_slot = 8 << 10;  // fewer slots in a heap under 512 MiB
inline constexpr std::uint64_t no_drain_claims = std::uint64_t{1} << 62;  // drain_next before the first drain: past every chunk
inline constexpr std::uint64_t live_granule = 16;  // the live map's bit per this many arena bytes
inline constexpr std::uint64_t walk_result_bytes = 16 << 10;  // what a walk over the heap reports, walks.h

struct checked_region {
  char* kernel_names;              // kernel_name_slots names, written by the host as kernels first run
  void* walk_result;               // walk_result_bytes: the result of the last walk (walks.h)
  std::uint64_t* quarantine;       // quarantine_slots headers of freed blocks (0: empty), quarantine.h
  std::uint64_t quarantine_slots;  // a power of two
  std::uint64_t* live;             // one bit per live_granule of the arena: a live block starts there, live_map.h
  std::uint64_t live_words;
  std::uint64_t quarantine_pushes;   // frees that went into the quarantine so far (device)
  std::uint64_t quarantine_drained;  // quarantine_pushes when the last drain began, x2, +1 while it runs (device)
  std::uint64_t drain_next;          // chunks of the ring claimed by the drain that runs (device)
  std::uint64_t drain_left;          // chunks of the ring the drain that runs has not finished (device)
  std::uint64_t outside_begin;       // no arena (`cuda`): the lowest block handed out, read_check.h (device)
  std::uint64_t outside_end;         // and the highest end of one (device)
  std::uint32_t kernel;             // the name slot of the kernel launched last (host, before each launch)
  std::uint32_t reserved;
};

struct alignas(256) heap_header {
  std::uint32_t magic;     // heap_magic once initialised
  std::uint32_t strategy;  // a gpualloc::strategy_id
  std::uint32_t flags;     // heap_flags
  std::uint32_t reserved;
  std::uint64_t heap_bytes;  // the whole allocation, this header included
  arena space;               // what the strategy manages
  heap_counters counters;
  checked_region checks;
  alignas(128) unsigned char strategy_state[strategy_state_bytes];
};

GPUALLOC_INLINE std::uint64_t round_up(std::uint64_t v, std::uint64_t multiple) {
  return (v + multiple - 1) / multiple * multiple;
}

// Where a heap of `heap_bytes` whose header lies at address `base` keeps
// its checked region (when h->flags says checked mode) and its arena (when
// with_arena): written into h->checks and h->space. `h` is the header or
// the host's copy of it (libgpualloc fills in a copy of the device's). The
// caller zeroes the checked region (checked_region_bytes(h) from
// h->checks.kernel_names) before the heap is used.
GPUALLOC_INLINE void lay_out_heap(heap_header* h, std::uintptr_t base, std::uint64_t heap_bytes, bool with_arena) {
  std::uintptr_t next = base + sizeof(heap_header);
  h->checks = checked_region{};
  h->checks.drain_next = no_drain_claims;
  h->checks.outside_begin = ~std::uint64_t{0};
  if (h->flags & heap_flag_checked) {
    h->checks.kernel_names = reinterpret_cast<char*>(next);
    next += kernel_name_slots * kernel_name_bytes;
    h->checks.walk_result = reinterpret_cast<void*>(next);
    next += walk_result_bytes;
    std::uint64_t slots = most_quarantine_slots;  // 512 KiB of ring
    while (slots > 16 && slots * heap_bytes_per_quarantine_slot > heap_bytes) slots /= 2;
    h->checks.quarantine = reinterpret_cast<std::uint64_t*>(next);
    h->checks.quarantine_slots = slots;
    next += slots * sizeof(std::uint64_t);
    if (with_arena) {
      // Sized for an arena right after the map; the arena is a little smaller.
      const std::uint64_t before = next - base;
      const std::uint64_t granules = heap_bytes > before ? (heap_bytes - before) / live_granule : 0;
      h->checks.live = reinterpret_cast<std::uint64_t*>(next);
      h->checks.live_words = (granules + 63) / 64;
      next += h->checks.live_words * sizeof(std::uint64_t);
    }
  }
  if (!with_arena) {
    h->space = arena{nullptr, 0};
    return;
  }
  const std::uintptr_t begin = round_up(next, arena_alignment);
  const std::uint64_t used = begin - base;
  h->space = arena{reinterpret_cast<std::byte*>(begin), heap_bytes > used ? heap_bytes - used : 0};
}

// The bytes of h's checked region (0 without checked mode).
GPUALLOC_INLINE std::uint64_t checked_region_bytes(const heap_header* h) {
  const checked_region& c = h->checks;
  if (c.kernel_names == nullptr) return 0;
  const std::uint64_t* end = c.live != nullptr ? c.live + c.live_words : c.quarantine + c.quarantine_slots;
  return reinterpret_cast<std::uintptr_t>(end) - reinterpret_cast<std::uintptr_t>(c.kernel_names);
}

// The bytes a heap without an arena (`cuda`) needs with `flags`: its header
// and checked region.
GPUALLOC_INLINE std::uint64_t heap_bytes_without_arena(std::uint32_t flags) {
  heap_header plan{};
  plan.flags = flags;
  lay_out_heap(&plan, 0, most_quarantine_slots * heap_bytes_per_quarantine_slot, false);
  return round_up(sizeof(heap_header) + checked_region_bytes(&plan), 256);
}

// In place: a heap whose header lies at h (host tests).
GPUALLOC_INLINE void lay_out_heap(heap_header* h, std::uint64_t heap_bytes, bool with_arena) {
  lay_out_heap(h, reinterpret_cast<std::uintptr_t>(h), heap_bytes, with_arena);
}

// A strategy's state object, placed in the header's storage.
template <class State>
GPUALLOC_INLINE State& state_of(heap_header* h) {
  static_assert(sizeof(State) <= strategy_state_bytes, "strategy state does not fit heap_header::strategy_state");
  static_assert(alignof(State) <= 128, "strategy state over-aligned");
  return *reinterpret_cast<State*>(h->strategy_state);
}

}  // namespace gpualloc
