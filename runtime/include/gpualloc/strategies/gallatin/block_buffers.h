// Gallatin's block buffers (McCoy & Pandey 2024, section 4.3): for each size
// class, slots that map streaming multiprocessors (SM id modulo the class's
// slot count) to the block their slice requests go to.
//
// A slot word is [install sequence:32 | ref:32]: ref is `empty`, `busy` (a
// thread is installing a block), or block id + 1. Slots start empty and get
// their first block on first use, so a size class nobody asks for holds no
// memory.
//
// Invariants
//  K1 Only the thread that moved a slot from a word w to busy (one
//     compare-and-swap from exactly w) installs its next block; it stores the
//     block (or `empty`, when none is left) with the sequence advanced again.
//     The sequence makes every install a new word: a thread that saw the
//     slot's block exhausted can replace it only while that very install is
//     still there, never a later install of the same block.
//  K2 A block is replaced once it is exhausted: by the first thread that
//     finds it exhausted or reused for something else (its add came back
//     past the block's end or with another tag), not, as in the paper, by
//     the one that takes the last slice: that kept the replacing code (and
//     its registers) on every call's fast path. A replaced block stays where
//     it is in memory until its slices come back (slices.h).
//
// Memory ordering: the install stores the slot with release after starting
// the block; slices themselves are ordered through the block's counters
// (slices.h), so readers load slots relaxed.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/sm.h"
#include "gpualloc/strategies/gallatin/layout.h"
#include "gpualloc/strategies/gallatin/slices.h"

namespace gpualloc::gallatin_parts {

inline constexpr std::uint32_t slot_empty = 0;
inline constexpr std::uint32_t slot_busy = ~0u;

class block_buffers {
 public:
  GPUALLOC_HD block_buffers(const layout& L, std::byte* arena) : L_(L), arena_(arena) {}

  GPUALLOC_HD detail::device_atomic<std::uint64_t> slot(std::uint32_t i) const {
    return detail::device_atomic<std::uint64_t>(reinterpret_cast<std::uint64_t*>(arena_ + L_.slots_offset)[i]);
  }

  // The slot of class c this thread's SM uses.
  GPUALLOC_HD std::uint32_t my_slot(std::uint32_t c) const {
    return L_.cls[c].first_slot + (detail::sm_id() & L_.cls[c].slot_mask);
  }

  static GPUALLOC_HD std::uint32_t ref_of(std::uint64_t word) { return static_cast<std::uint32_t>(word); }

  // K1: if slot i still holds `seen`, makes it busy and installs a fresh block
  // of class c. False when the slot moved on, or no block was left (the slot
  // is then empty).
  GPUALLOC_HD bool replace(std::uint32_t c, std::uint32_t i, std::uint64_t seen) const {
    const std::uint64_t sequence = (seen >> 32) + 1;
    if (!slot(i).compare_exchange_strong(seen, sequence << 32 | slot_busy, detail::relaxed, detail::relaxed))
      return false;
    const slices S(L_, arena_);
    const std::uint32_t block = S.segments().get_block(L_.cls[c].block_log2);
    if (block != no_block) S.start(block, c);
    const std::uint32_t ref = block == no_block ? slot_empty : block + 1;
    slot(i).store((sequence + 1) << 32 | ref, detail::release);
    return block != no_block;
  }

  // Init, thread `t` of `threads`: every slot empty.
  GPUALLOC_HD void init(std::uint64_t t, std::uint64_t threads) const {
    for (std::uint64_t i = t; i < L_.slot_count; i += threads)
      reinterpret_cast<std::uint64_t*>(arena_ + L_.slots_offset)[i] = 0;
  }

 private:
  const layout& L_;
  std::byte* arena_;
};

}  // namespace gpualloc::gallatin_parts
