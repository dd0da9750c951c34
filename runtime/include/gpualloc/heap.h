// The heap of one context, as it lies in device memory.
//
//   [ heap_header | padding to arena_alignment | arena ............ ]
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
  std::uint64_t overflows;       // checked mode: red zones found written (overflow or underflow), checked.h
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

struct alignas(256) heap_header {
  std::uint32_t magic;     // heap_magic once initialised
  std::uint32_t strategy;  // a gpualloc::strategy_id
  std::uint32_t flags;     // heap_flags
  std::uint32_t reserved;
  std::uint64_t heap_bytes;  // the whole allocation, this header included
  arena space;               // what the strategy manages
  heap_counters counters;
  alignas(128) unsigned char strategy_state[strategy_state_bytes];
};

// The arena that follows a header in a heap of `heap_bytes` bytes.
GPUALLOC_INLINE arena arena_after_header(heap_header* h, std::uint64_t heap_bytes) {
  auto base = reinterpret_cast<std::uintptr_t>(h);
  std::uintptr_t begin = (base + sizeof(heap_header) + arena_alignment - 1) & ~(std::uintptr_t)(arena_alignment - 1);
  std::uint64_t used = begin - base;
  return arena{reinterpret_cast<std::byte*>(begin), heap_bytes > used ? heap_bytes - used : 0};
}

// A strategy's state object, placed in the header's storage.
template <class State>
GPUALLOC_INLINE State& state_of(heap_header* h) {
  static_assert(sizeof(State) <= strategy_state_bytes, "strategy state does not fit heap_header::strategy_state");
  static_assert(alignof(State) <= 128, "strategy state over-aligned");
  return *reinterpret_cast<State*>(h->strategy_state);
}

GPUALLOC_INLINE std::uint64_t round_up(std::uint64_t v, std::uint64_t multiple) {
  return (v + multiple - 1) / multiple * multiple;
}

}  // namespace gpualloc
