// Gallatin's arena layout: how big a segment is, which block sizes exist,
// how many block-buffer slots each size class gets, and where every table
// lies. A pure function of (arena bytes, SM count), computed once on the host
// by the strategy's plan and kept in its state; the device only reads it.
//
//   arena: [ segment kinds | segment headers | rings | block counters |
//            block-buffer slots | format flags | segment tree | block trees | data ]
//   data:  segment 0 | segment 1 | ...            (each 2^segment_log2 bytes)
//
// Sizes (the paper's, scaled down for small heaps):
//  - segment: 16 MiB, or arena/32 rounded down to a power of two when that
//    is smaller (at least 4 KiB), so every heap has 32 to 64 segments or
//    more (a heap of 2^k bytes < 1 GiB gets 2^(k-6): its arena is a little
//    less). Larger segments for small heaps strand too much in buffered
//    blocks of other sizes (a 16 MiB heap in 24 segments runs out under the
//    host stress test); smaller ones make the runs (below) shorter;
//  - slices: 9 size classes of 16 B .. 4 KiB; class c's blocks hold 4096
//    slices (64 KiB << c) unless a segment is smaller, then one block is the
//    whole segment;
//  - blocks of one size per segment, 4 KiB .. a segment, one block tree per
//    size; the smallest size in use is the smallest slice block or the
//    smallest block a whole-block request can get (a request above
//    max(4 KiB, segment/8) gets a block of its power of two);
//  - runs of slices: a request up to `run_limit` (segment/8) that one slice
//    does not fit exactly gets k slices of an eighth of its power of two, or
//    of a larger power of two that divides it (4 KiB at most): at most 1/5
//    lost to rounding instead of up to 1/2. A run is at most 1/8 of a block,
//    so the slices a run leaves at the end of a block cost at most 1/8 of
//    it, 1/16 on average;
//  - block-buffer slots: the paper's, one per SM for 16 B (a power of two,
//    SMs share slots modulo the count), half as many for each larger class,
//    at least 4; halved further (largest share first) until the blocks the
//    slots can hold stay within an eighth of the heap.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/bit_tree.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/heap.h"

namespace gpualloc::gallatin_parts {

inline constexpr std::uint32_t classes = 9;               // slices of 16 B << c
inline constexpr std::uint32_t min_slice_log2 = 4;        // 16 B
inline constexpr std::uint32_t max_slice_log2 = 12;       // 4 KiB
inline constexpr std::uint32_t block_slices_log2 = 12;    // 4096 slices per block
inline constexpr std::uint32_t min_segment_log2 = 12;     // 4 KiB
inline constexpr std::uint32_t max_segment_log2 = 24;     // 16 MiB
inline constexpr std::uint32_t segments_wanted_log2 = 5;  // a segment is at most heap/32
inline constexpr std::uint32_t max_trees = max_segment_log2 - min_segment_log2 + 1;

// Per segment: its format, free-block count and ring positions (segments.h),
// on a line of its own (block takers hammer it).
struct segment_header {
  // [free:32 (signed) | format:32]: free, the blocks in the ring and not
  // claimed by a taker (`unformatted` when not formatted); format,
  // [generation:24 | block log2:8 (0: not formatted)] (segments.h S2, S4)
  std::uint64_t state;
  std::uint32_t head;
  std::uint32_t tail;
  std::uint8_t padding[48];
};
static_assert(sizeof(segment_header) == 64);

// Per block: its slice counters (slices.h).
struct block_counters {
  std::uint32_t taken;      // [class tag:4 | slices taken:28]
  std::uint32_t remaining;  // slices not yet given back
};
static_assert(sizeof(block_counters) == 8);

struct class_info {
  std::uint32_t first_slot;  // the class's first block-buffer slot
  std::uint16_t slot_mask;   // slots - 1 (slots are a power of two)
  std::uint8_t block_log2;   // bytes of the class's blocks
  std::uint8_t count_log2;   // slices per block
};

struct layout {
  std::uint32_t segment_log2;
  std::uint32_t min_block_log2;  // smallest block size; the first block tree
  std::uint32_t trees;           // block trees: sizes min_block_log2 .. segment_log2
  std::uint32_t entries_log2;    // rings cells and block counters per segment (for the smallest blocks)
  std::uint32_t segments;        // 0: the arena is too small for anything
  std::uint32_t reserved;
  std::uint64_t run_limit;  // larger requests are whole blocks or runs of segments
  std::uint64_t slot_count;
  // arena offsets
  std::uint64_t kinds_offset;     // u32 per segment
  std::uint64_t headers_offset;   // segment_header per segment
  std::uint64_t cells_offset;     // u32 per ring cell, 2^entries_log2 per segment
  std::uint64_t counters_offset;  // block_counters, 2^entries_log2 per segment
  std::uint64_t slots_offset;     // u64 per slot
  std::uint64_t flags_offset;     // u32 per block tree: a segment is being formatted for it
  std::uint64_t trees_offset;     // segment tree, then the block trees, tree.words u64 each
  std::uint64_t data_offset;      // segment 0
  detail::bit_tree_layout tree;   // of every tree (one bit per segment)
  class_info cls[classes];

  GPUALLOC_HD std::uint64_t segment_bytes() const { return std::uint64_t{1} << segment_log2; }

  static layout make(std::uint64_t arena_bytes, std::uint32_t sm_count) {
    layout L{};
    std::uint32_t s =
        arena_bytes >> segments_wanted_log2 == 0 ? 0 : detail::highest_bit(arena_bytes >> segments_wanted_log2);
    L.segment_log2 = s < min_segment_log2 ? min_segment_log2 : s > max_segment_log2 ? max_segment_log2 : s;
    const std::uint32_t S = L.segment_log2;
    const std::uint32_t smallest_slice_block =
        min_slice_log2 + block_slices_log2 < S ? min_slice_log2 + block_slices_log2 : S;
    std::uint32_t smallest_whole_block = S;  // a request above max(4 KiB, S/8), rounded up to a power of two
    if (S > max_slice_log2) smallest_whole_block = S - 2 > max_slice_log2 + 1 ? S - 2 : max_slice_log2 + 1;
    L.min_block_log2 = smallest_slice_block < smallest_whole_block ? smallest_slice_block : smallest_whole_block;
    L.trees = S - L.min_block_log2 + 1;
    L.entries_log2 = S - L.min_block_log2;
    L.run_limit = std::uint64_t{1} << (S - 3);

    // Slots: the paper's counts, then halved while the buffered blocks could exceed heap/8.
    const std::uint32_t sms = sm_count < 1 ? 1 : sm_count;
    std::uint64_t slots[classes];
    for (std::uint32_t c = 0; c < classes; ++c) {
      std::uint64_t n = sms >> c;
      const std::uint64_t floor = sms < 4 ? sms : 4;
      if (n < floor) n = floor;
      slots[c] = std::uint64_t{1} << detail::highest_bit(n);
      const std::uint32_t block = min_slice_log2 + c + block_slices_log2;
      L.cls[c].block_log2 = static_cast<std::uint8_t>(block < S ? block : S);
      L.cls[c].count_log2 = static_cast<std::uint8_t>(L.cls[c].block_log2 - min_slice_log2 - c);
    }
    for (;;) {
      std::uint64_t buffered = 0, largest = 0;
      std::uint32_t largest_class = 0;
      for (std::uint32_t c = 0; c < classes; ++c) {
        const std::uint64_t bytes = slots[c] << L.cls[c].block_log2;
        buffered += bytes;
        if (slots[c] > 1 && bytes > largest) largest = bytes, largest_class = c;
      }
      if (buffered <= arena_bytes / 8 || largest == 0) break;
      slots[largest_class] /= 2;
    }
    for (std::uint32_t c = 0; c < classes; ++c) {
      L.cls[c].first_slot = static_cast<std::uint32_t>(L.slot_count);
      L.cls[c].slot_mask = static_cast<std::uint16_t>(slots[c] - 1);
      L.slot_count += slots[c];
    }

    // As many segments as fit next to their tables.
    const std::uint64_t entries = std::uint64_t{1} << L.entries_log2;
    const std::uint64_t per_segment = L.segment_bytes() + sizeof(std::uint32_t) + sizeof(segment_header) +
                                      entries * (sizeof(std::uint32_t) + sizeof(block_counters));
    for (std::uint64_t g = arena_bytes / per_segment + 1; g-- > 0;) {
      L.segments = static_cast<std::uint32_t>(g);
      L.tree = detail::bit_tree_layout::make(L.segments);
      L.kinds_offset = 0;
      L.headers_offset = round_up(L.kinds_offset + g * sizeof(std::uint32_t), 64);
      L.cells_offset = L.headers_offset + g * sizeof(segment_header);
      L.counters_offset = L.cells_offset + g * entries * sizeof(std::uint32_t);
      L.slots_offset = L.counters_offset + g * entries * sizeof(block_counters);
      L.flags_offset = L.slots_offset + L.slot_count * sizeof(std::uint64_t);
      L.trees_offset = round_up(L.flags_offset + L.trees * sizeof(std::uint32_t), 64);
      L.data_offset = round_up(L.trees_offset + (1 + L.trees) * L.tree.words * sizeof(std::uint64_t), 4096);
      if (L.data_offset + (g << S) <= arena_bytes) return L;
    }
    return layout{};  // not even the tables fit: no segments, nothing to initialise
  }
};

}  // namespace gpualloc::gallatin_parts
