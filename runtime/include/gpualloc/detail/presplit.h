// How the CMalloc family lays out its arena: a small table, then a circular
// list of chunks pre-split into binary-heap-shaped segments (Vinkler & Havran
// 2015, eq. 1: chunk i of a heap has size C(i) = R / 2^floor(log2 i)).
//
//   arena: [ shard hints | segment cursors | list: shard 0 | shard 1 | ... ]
//   shard: [ R | R/2 | R/2 | R/4 x4 | ... | R/2^d x 2^d (the last one takes the rest) ]
//
// A shard is one heap of depth d (levels 0..d, 2^(d+1)-1 segments, (d+1)*R
// bytes); CMalloc has one shard, the multi-SM variants one per SM (R' = R/#SM
// in the paper's words). Every shard has the same R and d; the bytes a shard
// has beyond (d+1)*R, and the list's bytes beyond shards*shard_bytes, go to
// the last segment of the shard / of the list. The first chunk of every
// segment is permanent (never absorbed by a merge), so segment starts are
// fixed, computable offsets that a walker may always jump to.
//
// Choices (for a 16 B - 8 KiB workload on 1-20 GiB):
//  - depth: the largest d <= 20 whose smallest segment R/2^d is at least 32 KiB,
//    four times the largest common request: a 1 GiB heap gets d = 11 (4,095
//    segments, R = 85 MiB), 16 GiB d = 14 (32,767 segments, R = 1.07 GiB),
//    16 GiB in 132 shards d = 8 (67,452 segments, R' = 13.8 MiB);
//  - shards: the count asked for (the SM count), at most 256 and at most one
//    per 64 KiB of heap;
//  - the largest request is the largest segment (~ list / (d+1) per shard);
//  - segments of at most 64 GiB (a cursor word's limit, below): arenas up to
//    about 1.3 TiB per shard.
//
// Table: one hint per shard (a segment index where that shard's walks start,
// 128 bytes apart so shards do not share a cache line) and one cursor word
// per segment: [ free epoch: high 32 bits | cursor: low 32 bits ], the cursor
// being the distance, in 16-byte units, from the segment's start to the chunk
// where walks entering the segment resume, the epoch a count (mod 2^32) of
// the frees in the segment; strategies/circular.h has their rules.
//
// Everything here is a pure function of (arena bytes, shard count), computed
// once on the host (the strategy's plan) and kept in its state.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/heap.h"

namespace gpualloc::detail {

struct presplit {
  static constexpr std::uint32_t max_depth = 20;
  static constexpr std::uint64_t min_leaf_bytes = 32u << 10;
  static constexpr std::uint64_t min_shard_bytes = 64u << 10;
  static constexpr std::uint32_t max_shards = 256;
  static constexpr std::uint64_t hint_stride = 128;  // bytes between two shard hints
  static constexpr std::uint64_t cursor_epoch_one = std::uint64_t{1} << 32;  // one free, in a cursor word
  static constexpr std::uint64_t max_segment_bytes = std::uint64_t{16} << 32;

  std::uint64_t cursors_offset;  // arena offset of the segments' cursor words (u64 each)
  std::uint64_t list_offset;     // arena offset of the chunk list (256-byte aligned)
  std::uint64_t list_bytes;      // length of the list; a `next` equal to it means offset 0
  std::uint64_t shard_bytes;     // bytes of every shard but the last
  std::uint64_t root;            // R: bytes of a shard's first segment
  std::uint64_t largest;         // bytes of the largest segment
  std::uint32_t depth;
  std::uint32_t shards;
  std::uint32_t segments_per_shard;  // 2^(depth+1) - 1
  std::uint32_t segments;            // 0: the arena is too small for anything

  GPUALLOC_HD static presplit make(std::uint64_t arena_bytes, std::uint32_t shards_wanted) {
    presplit L{};
    const std::uint64_t usable = arena_bytes & ~std::uint64_t{15};
    std::uint64_t shards = shards_wanted < 1 ? 1 : shards_wanted > max_shards ? max_shards : shards_wanted;
    if (shards > usable / min_shard_bytes) shards = usable / min_shard_bytes > 0 ? usable / min_shard_bytes : 1;
    for (int d = max_depth; d >= 0; --d) {
      const std::uint64_t per_shard = (std::uint64_t{2} << d) - 1;
      const std::uint64_t cursors = shards * hint_stride;
      const std::uint64_t list_offset = round_up(cursors + shards * per_shard * sizeof(std::uint64_t), 256);
      if (list_offset >= usable) continue;
      const std::uint64_t list = usable - list_offset;
      const std::uint64_t shard = list / shards & ~std::uint64_t{15};
      const std::uint64_t unit = std::uint64_t{32} << d;  // every segment at least 32 B, all multiples of 16
      const std::uint64_t root = shard / (d + 1) / unit * unit;
      if (root == 0 || (d > 0 && (root >> d) < min_leaf_bytes)) continue;
      L.cursors_offset = cursors;
      L.list_offset = list_offset;
      L.list_bytes = list;
      L.shard_bytes = shard;
      L.root = root;
      L.depth = static_cast<std::uint32_t>(d);
      L.shards = static_cast<std::uint32_t>(shards);
      L.segments_per_shard = static_cast<std::uint32_t>(per_shard);
      L.segments = static_cast<std::uint32_t>(shards * per_shard);
      const std::uint64_t last = (root >> d) + (shard - (d + 1) * root) + (list - shards * shard);
      L.largest = last > root ? last : root;
      if (L.largest > max_segment_bytes) return presplit{};  // a smaller depth only makes segments larger
      return L;
    }
    return L;
  }

  // A cursor word's cursor: its chunk's distance in bytes from the segment's start.
  GPUALLOC_HD static std::uint64_t cursor_distance(std::uint64_t word) { return (word & 0xffffffffu) * 16; }

  // `word` with its cursor set to the chunk `distance` bytes from the segment's start (its epoch kept).
  GPUALLOC_HD static std::uint64_t cursor_with_distance(std::uint64_t word, std::uint64_t distance) {
    return (word & ~std::uint64_t{0xffffffffu}) | distance / 16;
  }

  GPUALLOC_HD std::uint32_t first_segment(std::uint32_t shard) const { return shard * segments_per_shard; }

  GPUALLOC_HD std::uint32_t next_segment(std::uint32_t j) const { return j + 1 == segments ? 0 : j + 1; }

  // List offset of segment j's first (permanent) chunk.
  GPUALLOC_HD std::uint64_t segment_start(std::uint32_t j) const {
    const std::uint32_t shard = j / segments_per_shard;
    const std::uint64_t i = j - shard * segments_per_shard + 1;  // 1-based index in the shard's binary heap
    const std::uint32_t level = highest_bit(i);
    return shard * shard_bytes + level * root + (i - (std::uint64_t{1} << level)) * (root >> level);
  }

  GPUALLOC_HD std::uint64_t segment_end(std::uint32_t j) const {
    if ((j + 1) % segments_per_shard != 0) return segment_start(j + 1);
    const std::uint32_t shard = j / segments_per_shard;
    return shard + 1 == shards ? list_bytes : (shard + 1) * shard_bytes;
  }
};

}  // namespace gpualloc::detail
