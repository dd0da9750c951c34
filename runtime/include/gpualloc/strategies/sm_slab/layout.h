// sm-slab's arena layout: the segment size, the size classes, the slots per
// class and where every table lies. A pure function of (arena bytes, SM
// count), computed once on the host by the strategy's plan; the device only
// reads it.
//
//   arena: [ segment records | bitmaps | slot pairs | queue ends, next-block count, sweeps, search hints |
//            queue rings | segment tree | data ]
//   data:  segment 0 | segment 1 | ...           (each 2^segment_log2 bytes)
//
// Sizes:
//  - segment: the unit of the segment tree; a block is one segment or a
//    span of them (below), back in the tree as soon as its last object is
//    free. The largest power of two in 32 KiB .. 1 MiB for which every SM
//    can buffer two segments of each class up to 8 KiB within
//    an eighth of the arena (132 SMs: 16 GiB gets 128 KiB, 80 GiB 512 KiB),
//    else 32 KiB, and at most arena/64 (down to 2 KiB for tiny heaps);
//  - classes: objects of 16, 32, 48, 64 B, then four per doubling (80, 96,
//    112, 128, 160, 192 ... B: 5..8 times 2^(t-3)), so at most a fifth of a
//    request is lost to rounding; up to half a segment. Larger requests are
//    runs of whole segments;
//  - spans: a block of class c is a span of 2^span_log2(c) contiguous
//    segments, aligned to its size (the first, its head, carries the
//    block's record and bitmap), and holds objects(c) = floor(span / size)
//    objects. The span is one segment where that already gives
//    objects_wanted: 1 MiB of objects, at least 1024 (span_objects_roomy;
//    the slots may take it back to 512, span_objects, below) and at most
//    2048 (span_objects_most), else the smallest that does, capped so
//    that the head's bitmap (a bit per 16 B of a segment) holds every
//    object (size >= 16 << span_log2), a span lies in one word of the
//    segment tree (at most 64 segments) and takes at most arena/256; the
//    slot budget may narrow it again (slots, below). Why:
//    with one-segment blocks (128 KiB on a 16 GiB heap, 132 SMs) a block
//    held 128 objects of 1 KiB, 32 of 4 KiB, 16 of 8 KiB, so every warp or
//    two refilled its SM's slot (lock, tree claim, format) and refills
//    serialise per SM: 56x, 350x, 750x the time of a warp-aggregated bump
//    pointer at 1, 4, 8 KiB on an H100 (2.3-2.6x up to 256 B). With at
//    least 512 objects a block, requests of 256 B and 1 KiB still took 3.1x
//    (H200, 2^20 requests, 16 GiB): a refill (a block from the tree) takes
//    longer than an SM's requests take to use half a block, so every block
//    cost an SM one refill's wait. 2048 objects of 256 B (512 KiB) and 1024
//    of 1 KiB (1 MiB) took 1.7x and 2.1x (warm); 2048 of 1 KiB and of 4 KiB
//    were slower again (2.3x; 14x against 9.7x): the slots' share of the
//    arena (below) then halved the slots of the larger classes. At least
//    1024 where the slots have room (2026-12-03; 512 before) took 2, 4, 6 KiB
//    from 2.70x, 2.83x, 2.75x to 2.05x, 2.17x, 2.07x on a fresh 16 GiB heap
//    and from 3.04x, 3.20x, 2.95x to 2.17x, 2.32x, 2.22x warm (H200, medians
//    of 7 over two rounds); 8 KiB (512 there, below) stayed at 3.0x, 3.5x;
//  - slots: a pair (current, next block) per class and SM (the SM count rounded
//    up to a power of two; SMs share a slot modulo the count) up to 8 KiB, half
//    as many per doubling above. Then, while the blocks the slots can hold (two
//    spans per slot, counting at most one slot per SM) exceed the slot budget,
//    or those of the classes up to 8 KiB exceed the arena (small_slot_budget),
//    a class gives up half of its share: first one whose span holds more than
//    span_objects asks (roomy: it narrows back towards 512), among them for the
//    small classes' budget the one whose blocks hold the most objects, for the
//    slot budget the one whose slots hold the most; then, for the slot budget
//    alone, the class whose slots hold the most: its span narrows while a block
//    keeps narrow_objects objects, else its slots halve (at least one per
//    class; SMs share the slots of a class with fewer slots than SMs). So the
//    wider spans change no layout up to 12 GiB (132 SMs; from about 12.3 GiB
//    the classes from 1.25 KiB widen as the budgets allow), and on 16 GiB 2.5
//    and 5 KiB narrow back (819 objects) while 7 and 8 KiB stay wide (1,170 and
//    1,024; on 132 SMs this choice changes the layouts of about 15 to 16.5 GiB,
//    host layout tool). The classes up to 8 KiB have their own budget because a
//    workload of mixed sizes keeps all their slots busy at once: with 1024
//    objects for every class (17.4 GiB of slots on a 16 GiB heap), 2^20
//    requests of 16 B - 8 KiB took 4.0x `atomic` on a fresh heap instead of
//    3.3x (3.2x then; 16 B - 4 KiB 3.1x -> 2.9x). Which classes narrow matters
//    as much as the bytes: an 8 KiB block of 512 objects lasts an SM's 16
//    resident warps (122 registers) one round of claims, so every round waited
//    for a refill. Narrowing first the classes whose blocks hold the most
//    objects keeps 7 and 8 KiB wide: 8 KiB went from 0.211 to 0.168 ms on a
//    fresh heap and from 0.278 to 0.195 warm, warm 16 B - 8 KiB from 0.128 to
//    0.116, but fresh 16 B - 8 KiB from 0.133 to 0.142 (H100; H200: 0.203 ->
//    0.156, 0.278 -> 0.191, 0.125 -> 0.131); before whole-word spans searched
//    from their own place (blocks.h search_start), fresh 16 B - 8 KiB took
//    0.156 ms (H200). (2^20 requests, 16 GiB, medians of 7 over two or three
//    rounds; the other points within the rounds' spread.) The budget
//    (slot_budget) is the arena up to 2 GiB and twice it from 4 GiB: the slots
//    of every class are never all full at once, and a class that runs the heap
//    dry takes back the idle ones (sm_slab.h P6).
//    The budget trades speed for memory. A slot's refills are serial, so a
//    class is as fast as the bytes its slots hold: the refills a slot
//    serialises are the bytes its class hands out over the bytes its slots
//    hold. But a current block holds memory only its class can use, and
//    under churn, with objects live, for good. Narrowing before halving
//    keeps a slot per SM (SMs that share one queue on its refills) and
//    makes blocks that empty sooner, which churn needs. History (2^20
//    requests unless said, x `atomic`): 1, 4, 8 KiB on 16 GiB took 6.7x,
//    26x, 95x with an eighth of the arena, 5.5x, 22x, 44x with a quarter,
//    5.5x, 18x, 35x with all of it (H100); before P6, half the arena ran a
//    4 GiB heap dry at 72.5% with 8 KiB requests. Twice the arena on 16 GiB
//    gave 8 KiB a slot per SM (warm 10x -> 6.1x; H200). Up to 2026-12-03
//    the slots halved without narrowing, within half the arena up to 1 GiB
//    and all of it at 2 GiB; narrowing and the arena up to 2 GiB (H200,
//    fresh heap, medians of 5 over two rounds, against that): on 64 MiB,
//    16 B 9.9x -> 5.4x, 256 B (65,536 requests) 54x -> 30x, 4 KiB (4,096)
//    176x -> 90x, 16 B - 4 KiB (8,192) 49x -> 28x; on 256 MiB 16 B 3.0x ->
//    2.5x, 4 KiB (16,384) 216x -> 107x; on 1 GiB 256 B 6.6x -> 3.2x, 4 KiB
//    (65,536) 72x -> 37x, mixed (131,072) 27x -> 9.7x; on 2 GiB mixed 11x
//    -> 7.0x; on 4 GiB 4 KiB 6.4x -> 6.9x, the only point that lost. Churn
//    of 16 B - 4 KiB held 90% of 2 GiB live for 2000 rounds (before, the
//    fill stopped at 86%) and 60% of 256 MiB until round 9 of 200 (before,
//    a NULL in round 3; 70% now stops filling at 68%), but a round takes
//    longer (80% of 2 GiB: 31 -> 40 ms; 50% of 256 MiB: 1.4 -> 3.6 ms):
//    more blocks to refill;
//  - wide blocks: the budgets narrow a class's span for the case where
//    every class fills its slots at once, but a class used alone then
//    gets a small share of a small heap (the 4 KiB class: 4 slots of
//    64-object blocks on 64 MiB, so 4,096 requests waited for 16 refills
//    in a row per slot). So a block may span 2^wide times its class's
//    span and hold 2^wide times its objects (wide_most: up to 2^max_wide,
//    back towards objects_wanted with span_objects_roomy, within one tree
//    word and the head's bitmap). Only a prefetch widens (sm_slab.h P3:
//    half of a block is out, so its class is in demand), and only as far
//    as keeps every block the slots of all classes in use may hold at that
//    width within half of the free segments, and not at all while more
//    than half of the heap is in use (blocks.h wide_for); a slot's first
//    block, and every refill's, stays narrow, so classes used a little
//    hold what the budgets give them. The width is in the slot word
//    (slot_word::wide) and in the head's record (segment_record::wide), so
//    whoever handles a block knows its K and its span. For 132 SMs (H100,
//    H200) no layout of 16 GiB or more has a class that widens (the
//    budgets narrow no span below objects_wanted there); for more SMs a
//    few do (16 GiB on 144 SMs: one class, on 256 SMs: five);
//  - queues: per class, a ring of segment indices with room for all
//    segments (a queue that is full takes no more: blocks.h Q3).
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/bit_tree.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/detail/index_queue.h"
#include "gpualloc/heap.h"

namespace gpualloc::sm_slab_parts {

inline constexpr std::uint32_t min_object_log2 = 4;    // 16 B
inline constexpr std::uint32_t small_classes = 32;     // 16 B .. 8 KiB: a slot per SM where the heap allows
inline constexpr std::uint32_t min_segment_log2 = 11;  // 2 KiB, for tiny heaps
inline constexpr std::uint32_t usual_segment_log2 = 15;  // 32 KiB: four 8 KiB objects
inline constexpr std::uint32_t max_segment_log2 = 20;  // 1 MiB
inline constexpr std::uint32_t span_objects = 512;     // objects a block should hold at least (spans)
inline constexpr std::uint32_t span_objects_roomy = 1024;  // and where the slots have room, this many (slots)
inline constexpr std::uint32_t span_objects_most = 2048;  // and up to this many, within span_bytes
inline constexpr std::uint32_t narrow_objects = 64;    // a span narrowed for the slot budget keeps this many
inline constexpr std::uint64_t span_bytes = std::uint64_t{1} << 20;
inline constexpr std::uint32_t max_span_log2 = 6;      // 64 segments: one word of the segment tree
inline constexpr std::uint32_t max_segments = (1u << 22) - 2;  // a slot word names segment + 1 in 22 bits, not all ones
inline constexpr std::uint32_t max_wide = 3;  // a block widens its class's span at most 2^3 times (wide blocks)

// The most the slots' blocks may hold (slots, at the top): the arena up
// to 2 GiB, twice it from 4 GiB, and arena / 2 GiB times it between.
GPUALLOC_INLINE constexpr std::uint64_t slot_budget(std::uint64_t arena_bytes) {
  constexpr std::uint64_t gib = std::uint64_t{1} << 30;
  if (arena_bytes <= 2 * gib) return arena_bytes;
  if (arena_bytes >= 4 * gib) return 2 * arena_bytes;
  return arena_bytes * (arena_bytes >> 20) / (2 * gib >> 20);
}

// Classes with objects up to half a segment of 2^S bytes.
GPUALLOC_INLINE constexpr std::uint32_t classes_for(std::uint32_t S) { return 4 * S - 24; }
inline constexpr std::uint32_t max_classes = classes_for(max_segment_log2);

// The class of a request of `bytes` (a multiple of 16): 16, 32, 48, 64 B are
// classes 0..3; above, bytes in (2^(t-1), 2^t] rounds up to q * 2^(t-3),
// q in 5..8: class 4t + q - 29.
GPUALLOC_INLINE std::uint32_t class_of(std::uint64_t bytes) {
  const std::uint32_t t = detail::ceil_log2(bytes);
  if (t <= 6) return bytes <= 16 ? 0 : static_cast<std::uint32_t>((bytes - 1) >> 4);
  const auto q = static_cast<std::uint32_t>((bytes + (std::uint64_t{1} << (t - 3)) - 1) >> (t - 3));
  return 4 * t + q - 29;
}

// Class c's objects are class_units(c) << class_shift(c) bytes (layout's
// classes), a function of c alone: the fast path computes it, loads nothing.
GPUALLOC_INLINE constexpr std::uint32_t class_units(std::uint32_t c) { return c < 4 ? c + 1 : 5 + (c - 4) % 4; }
GPUALLOC_INLINE constexpr std::uint32_t class_shift(std::uint32_t c) {
  return c < 4 ? min_object_log2 : 4 + (c - 4) / 4;
}
GPUALLOC_INLINE constexpr std::uint64_t class_bytes(std::uint32_t c) {
  return std::uint64_t{class_units(c)} << class_shift(c);
}

// The objects a block of `size`-byte objects should hold: span_bytes' worth,
// at least `least` (span_objects, or span_objects_roomy where the slots have
// room) and at most span_objects_most (layout's spans).
GPUALLOC_INLINE constexpr std::uint64_t objects_wanted(std::uint64_t size, std::uint64_t least = span_objects) {
  const std::uint64_t by_bytes = span_bytes / size;
  return by_bytes < least ? least : by_bytes > span_objects_most ? span_objects_most : by_bytes;
}

// The most the blocks of the classes up to 8 KiB may hold in their slots: a
// workload of mixed sizes keeps every one of them busy at once (layout's slots).
GPUALLOC_INLINE constexpr std::uint64_t small_slot_budget(std::uint64_t arena_bytes) { return arena_bytes; }

// Per segment (blocks.h).
struct segment_record {
  std::uint64_t holds;  // [ticket:32 | in_slot:1 | queued:1 | count:30]
  std::uint32_t kind;   // kind_free, a class, kind_run | segments in the run, or tail_kind(class, d) (blocks.h)
  std::uint32_t wide;   // a head's: its block spans 2^wide times its class's span (wide blocks, at the top)
  std::uint8_t padding[16];
};
static_assert(sizeof(segment_record) == 32);

// The heap's shared words: P6's bookkeeping (sm_slab.h: its sweeps, and
// until when failing requests skip them after one that let nothing go),
// the scavengers' windows, and the classes in use (wide blocks).
struct shared_state {
  std::uint32_t sweeps;         // sweeps begun and ended: odd while one runs
  std::uint32_t scavenged;      // windows of segments handed to scavengers (blocks.h Q3)
  std::uint64_t barren_until;   // detail::now_ns() before which no sweep starts
  std::uint64_t classes_seen;   // bit c: class c took a fresh span since init (blocks.h wide_for)
};

// The current and the next block of one class on one SM (sm_slab.h P1).
struct slot_pair {
  std::uint64_t current;  // [position:32 | block], position in units of 2^width positions of its pass
  std::uint64_t next;     // [current's install:32 | block], or busy: its holder owns the pair
};

// A slot word's low half, its block: [sequence:5 | fresh:1 | width:2 |
// wide:2 | segment + 1:22] (segment part 0: none; all ones: busy, `next`
// only). fresh: the block was formatted for this pass (blocks.h B1);
// width: a claim of n lanes takes n << width positions (sm_slab.h P5);
// with no block, width 3 marks current closed (sm_slab.h closed); wide:
// the block spans 2^wide times its class's span and holds 2^wide times its
// objects (wide blocks, at the top). The high half of `current` is its
// pass's position in units of 2^width positions;
// `next`'s is current's low half, its install, whenever `next` is not busy
// (sm_slab.h P1). `current`'s sequence counts installs, `next`'s the
// takes of the pair's lock.
inline constexpr std::uint32_t no_segment = ~0u;
namespace slot_word {
inline constexpr std::uint32_t segment_part = (1u << 22) - 1;
inline constexpr std::uint32_t wide_shift = 22, width_shift = 24, fresh_bit = 1u << 26, sequence_shift = 27;
inline constexpr std::uint32_t block_part = (1u << sequence_shift) - 1;  // fresh, width, wide, segment
inline constexpr std::uint32_t position_shift = 32;

// The segment a word names, or no_segment (none, or busy).
GPUALLOC_INLINE constexpr std::uint32_t segment(std::uint64_t w) {
  const auto ref = static_cast<std::uint32_t>(w) & segment_part;
  return ref == 0 || ref == segment_part ? no_segment : ref - 1;
}
GPUALLOC_INLINE constexpr std::uint32_t width(std::uint64_t w) {
  return static_cast<std::uint32_t>(w) >> width_shift & 3;
}
GPUALLOC_INLINE constexpr std::uint32_t wide(std::uint64_t w) {
  return static_cast<std::uint32_t>(w) >> wide_shift & 3;
}
GPUALLOC_INLINE constexpr bool fresh(std::uint64_t w) { return (static_cast<std::uint32_t>(w) & fresh_bit) != 0; }
GPUALLOC_INLINE constexpr bool is_busy(std::uint64_t w) {
  return (static_cast<std::uint32_t>(w) & segment_part) == segment_part;
}
// Which install of a block a current word is: claims change only its position.
GPUALLOC_INLINE constexpr std::uint32_t install(std::uint64_t w) { return static_cast<std::uint32_t>(w); }
// The install of current that a `next` word (not busy) carries.
GPUALLOC_INLINE constexpr std::uint32_t current_install(std::uint64_t nxt) {
  return static_cast<std::uint32_t>(nxt >> 32);
}
// Positions of current's pass that claims took (past the block's objects once it is exhausted).
GPUALLOC_INLINE constexpr std::uint64_t taken(std::uint64_t w) { return (w >> position_shift) << width(w); }

// sm_slab.h P5: the width of a pass that starts with `live` of its K objects live.
GPUALLOC_INLINE constexpr std::uint32_t width_for(std::uint32_t live, std::uint32_t K) {
  const std::uint64_t free = live < K ? K - live : 0;
  return 4 * free >= 3 * std::uint64_t{K} ? 0 : 8 * free >= 3 * std::uint64_t{K} ? 1 : 2;
}
GPUALLOC_INLINE constexpr std::uint32_t block(std::uint32_t seg, std::uint32_t width, bool fresh,
                                              std::uint32_t wide = 0) {
  return (fresh ? fresh_bit : 0) | width << width_shift | wide << wide_shift | (seg == no_segment ? 0 : seg + 1);
}
// The block half of a `next` word (0: none).
GPUALLOC_INLINE constexpr std::uint32_t next_block(std::uint64_t nxt) {
  return static_cast<std::uint32_t>(nxt) & block_part;
}
// A current word after `old` naming `blk` (block_part only): its sequence
// advanced, a pass about to start (position 0).
GPUALLOC_INLINE constexpr std::uint64_t current(std::uint64_t old, std::uint32_t blk) {
  return ((static_cast<std::uint32_t>(old) >> sequence_shift) + 1) << sequence_shift | blk;
}
// `next` taken as the pair's lock from `old`: busy, its lock sequence advanced.
GPUALLOC_INLINE constexpr std::uint64_t next_busy(std::uint64_t old) {
  return (old & ~std::uint64_t{0xffffffff}) |
         static_cast<std::uint32_t>(((static_cast<std::uint32_t>(old) >> sequence_shift) + 1) << sequence_shift) |
         segment_part;
}
// The `next` word its holder stores from `held` (the busy word): current's
// install and `blk` (its pass started: sm_slab.h P3; 0: none).
GPUALLOC_INLINE constexpr std::uint64_t next(std::uint64_t held, std::uint32_t install, std::uint32_t blk) {
  return std::uint64_t{install} << 32 | (static_cast<std::uint32_t>(held) & ~block_part) | blk;
}
// `next` with its block taken out, all else kept (sm_slab.h P4).
GPUALLOC_INLINE constexpr std::uint64_t next_emptied(std::uint64_t nxt) { return nxt & ~std::uint64_t{block_part}; }
}  // namespace slot_word

struct class_info {
  std::uint32_t first_slot;  // the class's first slot pair
  std::uint32_t slot_mask;   // slot pairs - 1 (a power of two)
  std::uint32_t objects;     // per block
  std::uint16_t slot_blocks;  // blocks its slots hold at most: two per slot, counting one slot per SM
  std::uint8_t span_log2;     // a block is 2^span_log2 segments, or 2^wide times that (wide blocks)
  std::uint8_t wide_most;     // the most a block of the class may widen (wide blocks)
  std::uint64_t reciprocal;  // ceil(2^32 / class_units(c)): x / units = x * reciprocal >> 32 for x < 2^29
};

struct layout {
  std::uint32_t segment_log2;
  std::uint32_t classes;   // 16 B << c for c < classes
  std::uint32_t segments;  // 0: the arena is too small for anything
  std::uint32_t bitmap_words_log2;  // 64-bit words per segment (one bit per 16 B)
  std::uint32_t stretch;   // segments in each SM's stretch of the heap, a multiple of 64 (blocks.h search_start)
  std::uint32_t spans_from;  // where the first stretch starts: past single segments' words on a large heap (search_start)
  std::uint32_t wide_classes;  // classes that may widen (wide blocks)
  std::uint64_t slot_count;
  std::uint64_t queue_mask;  // ring entries per class - 1
  // arena offsets
  std::uint64_t records_offset;  // segment_record per segment
  std::uint64_t bitmaps_offset;  // 2^bitmap_words_log2 u64 per segment
  std::uint64_t slots_offset;    // slot_pair per slot
  std::uint64_t ends_offset;     // queue_bytes() per class: detail::queue_ends, entries, room
  std::uint64_t next_blocks_offset;  // detail::fill_count: blocks in slot pairs' `next` (sm_slab.h P4)
  std::uint64_t shared_offset;   // shared_state
  std::uint64_t hints_offset;    // hint_count u32: where an SM's last span was found (blocks.h search_start)
  std::uint64_t rings_offset;    // queue_mask + 1 u32 per class
  std::uint64_t tree_offset;     // the segment tree
  std::uint64_t data_offset;     // segment 0
  detail::bit_tree_layout tree;  // one bit per segment
  class_info cls[max_classes];

  GPUALLOC_HD std::uint64_t segment_bytes() const { return std::uint64_t{1} << segment_log2; }
  // Objects per block of class c, and per block widened 2^wide times.
  GPUALLOC_HD std::uint32_t objects(std::uint32_t c) const { return cls[c].objects; }
  GPUALLOC_HD std::uint32_t objects(std::uint32_t c, std::uint32_t wide) const { return cls[c].objects << wide; }
  // Where object i of a class-c block lies from its head's base, and back
  // (offset < 2^(20+6), so offset >> shift < 2^22: the reciprocal is exact).
  GPUALLOC_HD std::uint64_t object_offset(std::uint32_t c, std::uint32_t i) const {
    return std::uint64_t{i} * class_units(c) << class_shift(c);
  }
  GPUALLOC_HD std::uint32_t object_index(std::uint32_t c, std::uint64_t offset) const {
    return static_cast<std::uint32_t>((offset >> class_shift(c)) * cls[c].reciprocal >> 32);
  }

  static layout make(std::uint64_t arena_bytes, std::uint32_t sm_count) {
    layout L{};
    const std::uint64_t sms = sm_count < 1 ? 1 : sm_count;
    const std::uint64_t sm_slots = std::uint64_t{1} << detail::ceil_log2(sms);
    std::uint32_t S = max_segment_log2;
    const auto buffers = [&](std::uint32_t S) {  // two blocks per SM and class up to 8 KiB
      return 2 * std::uint64_t{classes_for(S) < small_classes ? classes_for(S) : small_classes} * sms << S;
    };
    while (S > min_segment_log2 &&
           ((std::uint64_t{64} << S) > arena_bytes || (S > usual_segment_log2 && buffers(S) > arena_bytes / 8)))
      --S;
    L.segment_log2 = S;
    L.classes = classes_for(S);
    L.bitmap_words_log2 = S - min_object_log2 - 6;

    // Spans and slots: one pair per SM up to 8 KiB, halved per doubling
    // above; then, while two spans a slot exceed the slot budget (or, for
    // the classes up to 8 KiB, their own), a class gives up half: a roomy
    // one first, else the one whose slots hold the most bytes: its span
    // narrows while it keeps narrow_objects, else its slots halve.
    std::uint64_t slots[max_classes];
    const auto objects_in = [S](std::uint32_t c, std::uint32_t m) {  // a span of 2^m segments, class c
      return static_cast<std::uint32_t>((std::uint64_t{1} << (S + m)) / class_bytes(c));
    };
    for (std::uint32_t c = 0; c < L.classes; ++c) {
      const std::uint32_t halvings = c < small_classes ? 0 : (c - small_classes) / 4 + 1;
      slots[c] = sm_slots >> halvings ? sm_slots >> halvings : 1;
      class_info& ci = L.cls[c];
      ci.reciprocal = ((std::uint64_t{1} << 32) + class_units(c) - 1) / class_units(c);
      const std::uint64_t size = class_bytes(c);
      std::uint32_t m = 0;  // the span (see the top)
      while (m < max_span_log2 && objects_in(c, m) < objects_wanted(size, span_objects_roomy) &&
             size >= std::uint64_t{16} << (m + 1) && (std::uint64_t{1} << (S + m + 1)) <= arena_bytes / 256)
        ++m;
      ci.span_log2 = m;
      ci.objects = objects_in(c, m);
    }
    const auto narrowable = [&](std::uint32_t c) {
      const std::uint32_t m = L.cls[c].span_log2;
      return m > 0 && objects_in(c, m - 1) >= narrow_objects;
    };
    const auto roomy = [&](std::uint32_t c) {  // narrowed, it still holds objects_wanted
      const std::uint32_t m = L.cls[c].span_log2;
      return m > 0 && objects_in(c, m - 1) >= objects_wanted(class_bytes(c));
    };
    for (;;) {
      std::uint64_t buffered = 0, small = 0;  // bytes in all slots, in those of the classes up to 8 KiB
      for (std::uint32_t c = 0; c < L.classes; ++c) {
        const std::uint64_t bytes = ((slots[c] < sms ? slots[c] : sms) * 2) << (S + L.cls[c].span_log2);
        buffered += bytes;
        if (c < small_classes) small += bytes;
      }
      const bool over = buffered > slot_budget(arena_bytes);
      if (!over && small <= small_slot_budget(arena_bytes)) break;
      // The class to give up half: roomy ones first, then the heaviest.
      std::uint64_t largest = 0;  // the heaviest candidate's weight
      std::uint32_t largest_class = 0;
      bool largest_roomy = false;
      for (std::uint32_t c = 0; c < L.classes; ++c) {
        // For the slot budget the segments its slots hold; for the small classes' alone, the objects a block holds.
        const std::uint64_t weight =
            over ? (slots[c] < sms ? slots[c] : sms) << L.cls[c].span_log2 : std::uint64_t{L.cls[c].objects};
        const bool candidate = over ? slots[c] > 1 || narrowable(c) : c < small_classes && roomy(c);
        if (candidate && (roomy(c) > largest_roomy || (roomy(c) == largest_roomy && weight >= largest)))
          largest = weight, largest_class = c, largest_roomy = roomy(c);
      }
      if (largest == 0) break;
      class_info& ci = L.cls[largest_class];
      if (narrowable(largest_class)) {
        --ci.span_log2;
        ci.objects = objects_in(largest_class, ci.span_log2);
      } else {
        slots[largest_class] /= 2;
      }
    }
    for (std::uint32_t c = 0; c < L.classes; ++c) {
      class_info& ci = L.cls[c];
      ci.first_slot = static_cast<std::uint32_t>(L.slot_count);
      ci.slot_mask = static_cast<std::uint32_t>(slots[c] - 1);
      ci.slot_blocks = static_cast<std::uint16_t>(2 * (slots[c] < sms ? slots[c] : sms));
      L.slot_count += slots[c];
      // Wide blocks: back up to the objects the class wanted before the
      // budgets narrowed it, within one tree word and the head's bitmap.
      const std::uint64_t wanted = objects_wanted(class_bytes(c), span_objects_roomy);
      const std::uint64_t bitmap_bits = std::uint64_t{64} << L.bitmap_words_log2;
      ci.wide_most = 0;
      while (ci.wide_most < max_wide && ci.span_log2 + ci.wide_most < max_span_log2 &&
             (std::uint64_t{ci.objects} << (ci.wide_most + 1)) <= (wanted < bitmap_bits ? wanted : bitmap_bits))
        ++ci.wide_most;
      L.wide_classes += ci.wide_most > 0;
    }

    // As many segments as fit next to their tables.
    const std::uint64_t bitmap_bytes = sizeof(std::uint64_t) << L.bitmap_words_log2;
    const std::uint64_t per_segment =
        L.segment_bytes() + sizeof(segment_record) + bitmap_bytes + L.classes * sizeof(std::uint32_t);
    const std::uint64_t most = arena_bytes / per_segment < max_segments ? arena_bytes / per_segment : max_segments;
    for (std::uint64_t g = most + 1; g-- > 0;) {
      if (g == 0) break;
      L.segments = static_cast<std::uint32_t>(g);
      L.tree = detail::bit_tree_layout::make(L.segments);
      L.spans_from = g >= single_words_apart * 64 ? single_words * 64 : 0;
      L.stretch = static_cast<std::uint32_t>((g - L.spans_from) / (sms < hint_sms ? sms : hint_sms) / 64 * 64);
      if (L.stretch == 0) L.stretch = 64;
      L.queue_mask = (std::uint64_t{1} << detail::ceil_log2(g)) - 1;
      L.records_offset = 0;
      L.bitmaps_offset = round_up(L.records_offset + g * sizeof(segment_record), 128);
      L.slots_offset = round_up(L.bitmaps_offset + g * bitmap_bytes, 128);
      L.ends_offset = round_up(L.slots_offset + L.slot_count * sizeof(slot_pair), 128);
      L.next_blocks_offset = L.ends_offset + L.classes * queue_bytes();
      L.shared_offset = L.next_blocks_offset + sizeof(detail::fill_count);
      L.hints_offset = L.shared_offset + sizeof(shared_state);
      L.rings_offset = round_up(L.hints_offset + hint_count * sizeof(std::uint32_t), 128);
      L.tree_offset = round_up(L.rings_offset + L.classes * (L.queue_mask + 1) * sizeof(std::uint32_t), 128);
      L.data_offset = round_up(L.tree_offset + L.tree.words * sizeof(std::uint64_t), 4096);
      if (L.data_offset + (g << S) <= arena_bytes) return L;
    }
    return layout{};  // not even the tables fit: no segments, nothing to initialise
  }

  // Search hints: one per SM (modulo hint_sms) and span size above one
  // segment (blocks.h search_start).
  static constexpr std::uint64_t hint_sms = 256;
  static constexpr std::uint64_t hint_count = hint_sms * max_span_log2;
  // Single segments are searched from the lowest single_words words of the
  // tree (blocks.h search_start); on a heap of single_words_apart times
  // those words or more, the stretches where spans are searched start after
  // them.
  static constexpr std::uint32_t single_words = 64;
  static constexpr std::uint32_t single_words_apart = 8 * single_words;

  // One class's queue: its ends, the entries in it and the room left (blocks.h).
  static constexpr std::uint64_t queue_bytes() {
    return (sizeof(detail::queue_ends) + 2 * sizeof(detail::fill_count) + 127) / 128 * 128;
  }
};

}  // namespace gpualloc::sm_slab_parts
