// The random walk's arena layout: a pure function of the arena's size and
// the unit size, computed once on the host by the strategy's plan.
//
//   arena: [ controls | used bitmap | LockMap | unit tags | last-unit slots | pad | units ]
//
//  - units: the pool of equal units the walks search (the paper's pages),
//    unit_bytes each: GPUALLOC_RW_UNIT, a power of two from 64 to 4096,
//    by default 256 B as the paper's RW_malloc evaluation (the 8 KiB
//    largest request over a 32-bit bitmap word, section V-B2);
//  - used bitmap and LockMap: detail/unit_bitmap.h (a bit per unit, a lock
//    bit per 32 units);
//  - unit tags: a 32-bit word per unit that says which run a block in that
//    unit belongs to (run_tags.h): 4 bytes per unit, the largest table
//    (1.6 % of the arena at 256 B units);
//  - last-unit slots: CRW's last_free_page of each thread (Algorithm 5), one
//    word per lane of every warp slot of every SM, fewer on small heaps
//    (threads then share slots; a slot is only a hint);
//  - controls: what the searches share (random_walk.h R4, R5).
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/unit_bitmap.h"
#include "gpualloc/heap.h"

namespace gpualloc::random_walk_parts {

inline constexpr std::uint32_t default_unit_bytes = 256;
inline constexpr std::uint32_t warp_slots_per_sm = 64;  // resident warps per SM on sm_70 .. sm_90
inline constexpr std::uint32_t lanes = 32;

inline constexpr std::uint32_t dry_buckets = 33;  // needs of 2^0 .. 2^32 units

// The dry windows (random_walk.h R4), by bucket floor(log2 units): a
// request of n units in bucket b does not sweep before dry_until[b] if
// n >= dry_from[b], the fewest units a sweep of that bucket found no room for.
struct controls {
  std::uint64_t next_fit;  // the word after the last run larger than a region (R5)
  std::uint32_t dry;       // nonzero from a sweep's start while windows may be open: a free then closes them all
  std::uint32_t closes;    // windows closed so far: a sweep that saw it change opens none
  std::uint64_t dry_until[dry_buckets];
  std::uint64_t dry_from[dry_buckets];
};

struct layout {
  std::uint32_t unit_bytes;  // a power of two, 64 .. 4096
  std::uint32_t hint_slots;  // CRW's last-unit slots: a power of two
  std::uint64_t units;       // units in the pool (0: too small an arena)
  std::uint64_t bitmap_offset, locks_offset, tags_offset, hints_offset, units_offset;

  GPUALLOC_HD std::uint64_t words() const { return detail::unit_bitmap::words_for(units); }

  static layout make(std::uint64_t arena_bytes, std::uint32_t sm_count, std::uint32_t unit_bytes = default_unit_bytes) {
    layout L{};
    L.unit_bytes = unit_bytes;
    // One slot per lane of every warp slot, but at most one per 64 units' worth of arena.
    std::uint64_t slots = std::uint64_t{sm_count} * warp_slots_per_sm * lanes;
    while (slots > 1 && slots * 64 * unit_bytes > arena_bytes) slots /= 2;
    std::uint32_t pow2 = 1;
    while (pow2 * 2 <= slots) pow2 *= 2;
    L.hint_slots = pow2;
    // The most units whose tables and units fit.
    const std::uint64_t per_unit = unit_bytes + sizeof(std::uint32_t);  // a unit and its tag; bits counted below
    std::uint64_t units = arena_bytes / per_unit;
    for (;; units -= units / 65536 + 1) {
      L.units = units;
      L.place();
      if (units == 0 || L.units_offset + units * unit_bytes <= arena_bytes) break;
    }
    return L;
  }

 private:
  void place() {
    auto up = [](std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; };
    bitmap_offset = up(sizeof(controls), 128);
    locks_offset = up(bitmap_offset + detail::unit_bitmap::words_for(units) * 4, 128);
    tags_offset = up(locks_offset + detail::unit_bitmap::lock_words_for(units) * 4, 128);
    hints_offset = up(tags_offset + units * 4, 128);
    units_offset = up(hints_offset + std::uint64_t{hint_slots} * 4, unit_bytes);
  }
};

// The arena seen through its layout.
struct pool {
  const layout& L;
  std::byte* arena;

  GPUALLOC_HD controls& control() const { return *reinterpret_cast<controls*>(arena); }
  GPUALLOC_HD detail::unit_bitmap bitmap() const {
    return {reinterpret_cast<std::uint32_t*>(arena + L.bitmap_offset), reinterpret_cast<std::uint32_t*>(arena + L.locks_offset),
            L.words()};
  }
  GPUALLOC_HD std::uint32_t* tags() const { return reinterpret_cast<std::uint32_t*>(arena + L.tags_offset); }
  GPUALLOC_HD std::uint32_t* hints() const { return reinterpret_cast<std::uint32_t*>(arena + L.hints_offset); }
  GPUALLOC_HD std::byte* unit(std::uint64_t u) const { return arena + L.units_offset + u * L.unit_bytes; }
  GPUALLOC_HD std::uint64_t unit_of(const void* p) const {
    return static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - (arena + L.units_offset)) / L.unit_bytes;
  }
};

}  // namespace gpualloc::random_walk_parts
