// Gallatin (McCoy & Pandey, "Gallatin: A General-Purpose GPU Memory
// Manager", PPoPP 2024, sections 3-5).
//
// The heap is cut into segments (layout.h). A free segment sits in the
// segment tree, a 64-ary bit tree (detail/bit_tree.h) that hands out the
// lowest one first; runs of several segments for the largest requests come
// from its back. A segment formatted into blocks of one size joins that
// size's block tree and keeps its free blocks in a ring (segments.h). A block
// of size class c holds 4096 slices of 16 B << c, handed out in order by one
// counter and recycled when all have come back (slices.h); per size class,
// block buffers give every SM a current block (block_buffers.h).
//
// malloc(bytes), by size (route):
//  - up to 4 KiB, and runs up to a segment/8: slices. The lanes of the
//    group that want the same (class, run length) form one group (Algorithm
//    3); its leader adds all their slices to the SM's current block with one
//    fetch-add, the lanes take consecutive slices. A leader that finds no
//    block, one being installed or an exhausted one installs, waits or
//    replaces (block_buffers.h K2) and adds again, while its lanes wait
//    (G1); only lanes whose runs did not fit the block's end go on alone,
//    one fetch-add each.
//    A request that is no power of two gets k slices of an eighth of its
//    power of two (at most 1/5 lost to rounding, not 1/2); each of its slices
//    after the first is credited back at once, so its one free returns it.
//  - above that, up to a segment: a whole block of its power of two, from
//    the block tree of that size.
//  - above a segment: a run of whole segments, lock-free (no spin lock).
// free(p): the segment's kind gives the block size, hence the block; lanes
// freeing into the same block subtract from its counter once; the last free
// of a block puts it back into its segment's ring, the last block of a
// segment puts the segment back into the segment tree. A run of segments
// goes back to the segment tree.
//
// Fixed protocols (the original's races, found reading it): a buffer slot
// read just before its block was recycled and reused sent requests into a
// block of another size class or a free one, and a fresh block's counter
// reset could wipe such a request's slices; a segment could be formatted
// while a straggler still decremented its old block count; a ring position
// could be overwritten while its taker was still reading it. Here: tagged
// block counters with credits for every slice nobody can use (slices.h
// B1-B3), sequence-numbered buffer slots (block_buffers.h K1), a
// generation-checked segment state and Vyukov ring cells (segments.h S2-S4).
//
// Warp rules: group operations (partition, broadcast, sync) happen only
// while the group's lanes are together, before any of them returns or
// loops (a lane with a large request too); a retry loop runs inside the
// leader's step (G1) or per lane. sync() after the broadcast orders each
// lane after the leader's acquire; in free, sync() before the leader's
// release orders every lane's writes before it.
//
// Invariant G1: a refill costs one fetch-add per group, not per lane. Lanes
// that went on alone whenever their group found the block exhausted or being
// replaced made every exhaustion a stampede: all the warps of the SMs
// sharing the slot (33 of an H100's at 1 KiB) turned into single lanes
// adding to one counter, and stayed so for the next blocks (on the H100,
// ~40 us per block and slot, whatever the class). So the leader itself waits
// for an install, installs or replaces (K1, K2) and adds again for its
// group, inside its leader-only step, before the broadcast; its lanes wait
// at the broadcast, no group operation is inside the loop.
//
// Rare paths (refills, large requests, frees that recycle) are out of line,
// so each call site inlines only the fast path. That saves code, not
// registers: ptxas keeps a caller's live values in registers above an
// out-of-line callee's, so a kernel that calls malloc needs about the fast
// path's live values plus those of its deepest chain of out-of-line calls
// (80 on sm_90; inlining everything is no better). Hence one out-of-line
// level per path: the lane-alone path inlines its refill loop, replacing a
// block happens there and not in settle (106 registers otherwise), and
// get_block stays inline in both. Indices are 32-bit and the block
// counters 32-bit words for the same reason (a 64-bit add on a generic
// pointer also costs a shared-memory check).
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"
#include "gpualloc/strategies/gallatin/block_buffers.h"
#include "gpualloc/strategies/gallatin/layout.h"
#include "gpualloc/strategies/gallatin/segments.h"
#include "gpualloc/strategies/gallatin/slices.h"
#include "gpualloc/strategy.h"

namespace gpualloc::strategies {

struct gallatin {
  struct state {
    gallatin_parts::layout L;
  };

  static constexpr int init_phases = 1;

  static void plan(state& s, const arena& a, const device_facts& facts) {
    s.L = gallatin_parts::layout::make(a.bytes, facts.sm_count);
  }

  GPUALLOC_HD static void init(state& s, const arena& a, int /*phase*/, std::uint64_t thread, std::uint64_t threads) {
    gallatin_parts::segment_table(s.L, a.begin).init(thread, threads);
    gallatin_parts::block_buffers(s.L, a.begin).init(thread, threads);
  }

  GPUALLOC_HD static void* malloc(state& s, const arena& a, std::uint64_t bytes, const detail::lane_group& group) {
    using namespace gallatin_parts;
    const layout& L = s.L;
    if (L.segments == 0) return nullptr;
    const request r = route(L, bytes);
    const detail::lane_group g = group.partition(r.key());
    std::uint64_t got = no_slices;
    if (g.is_leader() && r.k != 0) got = take_for_group(L, a.begin, r, g.size());
    got = g.broadcast(got);
    g.sync();  // every lane is ordered after the leader's acquire
    if (got != no_slices) {
      void* p = run_at(L, a.begin, r, got, g.rank());
      if (g.is_leader() && must_settle(L, r, g.size(), got)) settle(L, a.begin, r, g.size(), got);
      if (p != nullptr) return p;
    }
    return r.k == 0 ? malloc_large(L, a.begin, bytes) : malloc_alone(L, a.begin, r);
  }

  GPUALLOC_HD static void free(state& s, const arena& a, void* p, const detail::lane_group& group) {
    using namespace gallatin_parts;
    const layout& L = s.L;
    const segment_table T(L, a.begin);
    const auto offset = static_cast<std::uint64_t>(static_cast<std::byte*>(p) - T.data());
    const auto seg = static_cast<std::uint32_t>(offset >> L.segment_log2);
    const std::uint32_t kind = T.kind(seg);
    const bool run = (kind & kind_run) != 0;
    const std::uint32_t j = run ? L.segment_log2 : kind & 0xffu;
    const std::uint32_t block = T.block_id(seg, static_cast<std::uint32_t>((offset & (L.segment_bytes() - 1)) >> j));
    const detail::lane_group g = group.partition(run ? ~std::uint64_t{seg} : block);
    if (run) return free_run(L, a.begin, seg);
    g.sync();  // every lane's writes to its slices come before the leader's release
    if (g.is_leader()) slices(L, a.begin).give_back(block, g.size());
  }

 private:
  static constexpr std::uint64_t no_slices = ~std::uint64_t{0};

  // k slices of class c; k == 0: a whole block or a run of segments.
  struct request {
    std::uint32_t c;
    std::uint32_t k;
    GPUALLOC_HD std::uint64_t key() const { return std::uint64_t{k} << 4 | c; }
  };

  GPUALLOC_HD static request route(const gallatin_parts::layout& L, std::uint64_t bytes) {
    using namespace gallatin_parts;
    if (bytes > L.run_limit && bytes > (std::uint64_t{1} << max_slice_log2)) return {0, 0};
    const std::uint32_t top = detail::ceil_log2(bytes);                         // bytes <= 2^top
    std::uint32_t slice = top > min_slice_log2 + 3 ? top - 3 : min_slice_log2;  // an eighth of it, at least 16 B
    const std::uint32_t aligned = detail::lowest_bit(bytes);  // fewer, larger slices when bytes allows
    if (aligned > slice) slice = aligned;
    if (slice > max_slice_log2) slice = max_slice_log2;
    const auto k = static_cast<std::uint32_t>((bytes + (std::uint64_t{1} << slice) - 1) >> slice);
    if (k > 1 && bytes > L.run_limit) return {top - min_slice_log2, 1};  // blocks too small for runs: one slice
    return {slice - min_slice_log2, k};
  }

  // A grant: what a group leader took for its group, broadcast to the lanes:
  // the data offset of the block, and in its bits below the block size
  // (always zero in a block's offset) the slices taken before the group.
  GPUALLOC_HD static std::uint32_t start_of(std::uint64_t got, gallatin_parts::class_info ci) {
    return static_cast<std::uint32_t>(got & ((std::uint64_t{1} << ci.block_log2) - 1));
  }
  GPUALLOC_HD static std::uint64_t block_offset_of(std::uint64_t got, gallatin_parts::class_info ci) {
    return got & ~((std::uint64_t{1} << ci.block_log2) - 1);
  }
  GPUALLOC_HD static std::uint32_t block_of(const gallatin_parts::layout& L, std::uint64_t got,
                                            gallatin_parts::class_info ci) {
    const std::uint64_t base = block_offset_of(got, ci);
    return static_cast<std::uint32_t>(base >> L.segment_log2) << L.entries_log2 |
           static_cast<std::uint32_t>((base & (L.segment_bytes() - 1)) >> ci.block_log2);
  }

  // The run at `rank` of grant `got` (runs of r.k), or nullptr past the block's end.
  GPUALLOC_HD static void* run_at(const gallatin_parts::layout& L, std::byte* arena, request r, std::uint64_t got,
                                  std::uint32_t rank) {
    const gallatin_parts::class_info ci = L.cls[r.c];
    const std::uint32_t first = start_of(got, ci) + rank * r.k;
    return first + r.k <= 1u << ci.count_log2 ? arena + L.data_offset + block_offset_of(got, ci) +
                                                    (std::uint64_t{first} << (gallatin_parts::min_slice_log2 + r.c))
                                              : nullptr;
  }

  // Whether the grant of `lanes` runs needs settle: runs to credit, or runs past the block's end.
  GPUALLOC_HD static bool must_settle(const gallatin_parts::layout& L, request r, std::uint32_t lanes,
                                      std::uint64_t got) {
    const gallatin_parts::class_info ci = L.cls[r.c];
    return r.k > 1 || start_of(got, ci) + lanes * r.k > 1u << ci.count_log2;
  }

  // One fetch-add of `lanes` runs of r.k slices on the block that slot word
  // `seen` names: the grant, or no_slices when it names no block of class
  // r.c with slices left (empty, being installed, exhausted, reused: B2, B3).
  GPUALLOC_HD static std::uint64_t take_from(const gallatin_parts::layout& L, std::byte* arena, request r,
                                             std::uint32_t lanes, std::uint64_t seen) {
    using namespace gallatin_parts;
    const std::uint32_t ref = block_buffers::ref_of(seen);
    if (ref == slot_empty || ref == slot_busy) return no_slices;
    const slices S(L, arena);
    const class_info ci = L.cls[r.c];
    const std::uint32_t block = ref - 1, total = lanes * r.k;
    const std::uint32_t before = S.take(block, total);
    if (tag_of(before) != class_tag(r.c)) {
      S.give_back_foreign(block, before, total);
      return no_slices;
    }
    const std::uint32_t start = before & count_mask;
    if (start >= 1u << ci.count_log2) return no_slices;
    return S.offset(block, ci.block_log2) | start;
  }

  // The group leader: slices for its lanes' runs from its SM's current
  // block of class r.c; no_slices only when the class has no block left.
  GPUALLOC_HD static std::uint64_t take_for_group(const gallatin_parts::layout& L, std::byte* arena, request r,
                                                  std::uint32_t lanes) {
    const gallatin_parts::block_buffers buffers(L, arena);
    const std::uint64_t seen = buffers.slot(buffers.my_slot(r.c)).load(detail::relaxed);
    const std::uint64_t got = take_from(L, arena, r, lanes, seen);
    return got != no_slices ? got : refill(L, arena, r, lanes, seen);
  }

  // Slot word `seen` of this SM gave no slices: waits while the slot is
  // being installed, installs or replaces its block (K1, K2: the first to
  // find it exhausted replaces it), takes again (G1). no_slices when the
  // class has no block left. Out of line for the leader (refill), inlined
  // into the lane-alone path, so no path nests two out-of-line levels
  // (registers: see above).
  __attribute__((always_inline)) GPUALLOC_HD static inline std::uint64_t refill_here(
      const gallatin_parts::layout& L, std::byte* arena, request r, std::uint32_t lanes, std::uint64_t seen) {
    using namespace gallatin_parts;
    const block_buffers buffers(L, arena);
    const std::uint32_t i = buffers.my_slot(r.c);
    detail::backoff wait;
    for (;;) {
      if (block_buffers::ref_of(seen) == slot_busy)
        wait.pause();
      else if (!buffers.replace(r.c, i, seen) &&
               block_buffers::ref_of(buffers.slot(i).load(detail::relaxed)) == slot_empty)
        return no_slices;  // no block left for the class
      seen = buffers.slot(i).load(detail::relaxed);
      const std::uint64_t got = take_from(L, arena, r, lanes, seen);
      if (got != no_slices) return got;
    }
  }
  __attribute__((noinline)) GPUALLOC_HD static std::uint64_t refill(const gallatin_parts::layout& L, std::byte* arena,
                                                                    request r, std::uint32_t lanes, std::uint64_t seen) {
    return refill_here(L, arena, r, lanes, seen);
  }

  // The leader (or a lane alone), after its group took `got`: credits the
  // runs' extra slices and what did not fit the block (B2).
  __attribute__((noinline)) GPUALLOC_HD static void settle(const gallatin_parts::layout& L, std::byte* arena, request r,
                                                           std::uint32_t lanes, std::uint64_t got) {
    using namespace gallatin_parts;
    const class_info ci = L.cls[r.c];
    const std::uint32_t before = start_of(got, ci), n = 1u << ci.count_log2, total = lanes * r.k;
    const std::uint32_t room = (n - before) / r.k;
    const std::uint32_t fit = room < lanes ? room : lanes;
    const std::uint32_t lost = before + total > n ? n - before - fit * r.k : 0;
    const std::uint32_t credit = fit * (r.k - 1) + lost;
    if (credit != 0) slices(L, arena).give_back(block_of(L, got, ci), credit);
  }

  // A lane alone: the run of grant `got` (settled), or nullptr when it did
  // not fit the block's end.
  GPUALLOC_HD static void* take_run(const gallatin_parts::layout& L, std::byte* arena, request r, std::uint64_t got) {
    void* p = run_at(L, arena, r, got, 0);
    if (must_settle(L, r, 1, got)) settle(L, arena, r, 1, got);
    return p;
  }

  // A lane the group could not serve: its own run from its SM's slot until
  // it gets one. With no block left for the class, any other slot's block,
  // then NULL.
  __attribute__((noinline)) GPUALLOC_HD static void* malloc_alone(const gallatin_parts::layout& L, std::byte* arena,
                                                                  request r) {
    const gallatin_parts::block_buffers buffers(L, arena);
    for (;;) {
      const std::uint64_t seen = buffers.slot(buffers.my_slot(r.c)).load(detail::relaxed);
      std::uint64_t got = take_from(L, arena, r, 1, seen);
      if (got == no_slices) got = refill_here(L, arena, r, 1, seen);
      if (got == no_slices) return take_anywhere(L, arena, r);
      if (void* p = take_run(L, arena, r, got)) return p;
    }
  }

  // Out of blocks for class r.c: a run from whichever slot still has slices.
  GPUALLOC_HD static void* take_anywhere(const gallatin_parts::layout& L, std::byte* arena, request r) {
    const gallatin_parts::block_buffers buffers(L, arena);
    const gallatin_parts::class_info ci = L.cls[r.c];
    for (std::uint32_t i = ci.first_slot; i <= ci.first_slot + ci.slot_mask; ++i) {
      const std::uint64_t got = take_from(L, arena, r, 1, buffers.slot(i).load(detail::relaxed));
      if (got == no_slices) continue;
      if (void* p = take_run(L, arena, r, got)) return p;
    }
    return nullptr;
  }

  // Above a slice run: a whole block of bytes' power of two, or a run of segments.
  __attribute__((noinline)) GPUALLOC_HD static void* malloc_large(const gallatin_parts::layout& L, std::byte* arena,
                                                                  std::uint64_t bytes) {
    using namespace gallatin_parts;
    const segment_table T(L, arena);
    if (bytes <= L.segment_bytes()) {
      std::uint32_t j = detail::ceil_log2(bytes);
      if (j < L.min_block_log2) j = L.min_block_log2;
      const std::uint32_t block = T.get_block(j);
      if (block == no_block) return nullptr;
      const slices S(L, arena);
      S.start_whole(block);
      return T.data() + S.offset(block, j);
    }
    const std::uint64_t count = (bytes + L.segment_bytes() - 1) >> L.segment_log2;
    if (count > L.segments) return nullptr;
    const std::uint32_t first = T.claim_run(static_cast<std::uint32_t>(count));
    return first == detail::bit_tree::none ? nullptr : T.data() + (std::uint64_t{first} << L.segment_log2);
  }

  __attribute__((noinline)) GPUALLOC_HD static void free_run(const gallatin_parts::layout& L, std::byte* arena,
                                                             std::uint32_t first) {
    gallatin_parts::segment_table(L, arena).return_run(first);
  }
};

}  // namespace gpualloc::strategies
