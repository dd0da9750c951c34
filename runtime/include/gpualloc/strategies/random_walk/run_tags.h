// Which run of units a block belongs to: a 32-bit tag per unit, written
// for every unit in which a block starts, read by free.
//
// A run is the units one claim took: one block (a request of a unit or
// more), or the blocks of a warp's small requests packed one after another
// (section IV-C: "aggregate requests for small sizes within a warp"), which
// may straddle unit boundaries. Encoding:
//   head (the run's first unit): bit 31 clear; bit 30 set if the run is
//     shared by several blocks, with the count of those still live in bits
//     24..29; the run's length in units in bits 0..23, or 0 when it is
//     2^24 units or more and the length is the next unit's whole tag (a run
//     that long holds one block, which starts in its head);
//   another unit of a shared run in which a block starts: bit 31 set, the
//     distance back to the head in bits 0..30.
//
// Invariant T1: while a block is live, the tags of its run's head and of
// the unit it starts in are as its claim wrote them (a shared head's count
// aside): no other claim can own those units (unit_bitmap.h U1), so no
// other claim writes their tags.
//
// Memory ordering: tags are written by the claimer before the blocks are
// handed out and read by a free of one of those blocks, which the program
// ordered after the hand-out; relaxed. A shared head's count is decremented
// with acq_rel, so the last free is ordered after every other block's free
// before it clears the run's bits (release).
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"

namespace gpualloc::random_walk_parts {

// Units [first, first + units): what a free gives back.
struct unit_run {
  std::uint64_t first;
  std::uint64_t units;
};

struct run_tags {
  static constexpr std::uint32_t link_flag = 1u << 31;
  static constexpr std::uint32_t shared_flag = 1u << 30;
  static constexpr std::uint32_t live_shift = 24;
  static constexpr std::uint32_t live_mask = 0x3fu;
  static constexpr std::uint32_t length_mask = (1u << 24) - 1;
  static constexpr std::uint32_t max_shared_blocks = live_mask;

  std::uint32_t* tags;

  // The head of a run of `units` units holding one block.
  GPUALLOC_HD void set_single(std::uint64_t head, std::uint64_t units) const {
    const bool long_run = units > length_mask;
    store(head, long_run ? 0u : static_cast<std::uint32_t>(units));
    if (long_run) store(head + 1, static_cast<std::uint32_t>(units));
  }

  // The head of a shared run of `units` units (<= length_mask) holding `blocks` blocks.
  GPUALLOC_HD void set_shared(std::uint64_t head, std::uint64_t units, std::uint32_t blocks) const {
    store(head, shared_flag | blocks << live_shift | static_cast<std::uint32_t>(units));
  }

  // Unit u of a shared run whose head is `back` units before it.
  GPUALLOC_HD void set_link(std::uint64_t u, std::uint64_t back) const {
    store(u, link_flag | static_cast<std::uint32_t>(back));
  }

  // A block that starts in unit u is freed: true, with its run, if the run is free now.
  GPUALLOC_HD bool drop(std::uint64_t u, unit_run& run) const {
    std::uint32_t tag = load(u);
    if (tag & link_flag) {
      u -= tag & ~link_flag;
      tag = load(u);
    }
    run.first = u;
    run.units = tag & length_mask;
    if (!(tag & shared_flag)) {
      if (run.units == 0) run.units = load(u + 1);
      return true;
    }
    const std::uint32_t before = detail::device_atomic<std::uint32_t>(tags[u]).fetch_sub(1u << live_shift, detail::acq_rel);
    return (before >> live_shift & live_mask) == 1;
  }

 private:
  GPUALLOC_HD void store(std::uint64_t u, std::uint32_t v) const { detail::device_atomic<std::uint32_t>(tags[u]).store(v, detail::relaxed); }
  GPUALLOC_HD std::uint32_t load(std::uint64_t u) const { return detail::device_atomic<std::uint32_t>(tags[u]).load(detail::relaxed); }
};

}  // namespace gpualloc::random_walk_parts
