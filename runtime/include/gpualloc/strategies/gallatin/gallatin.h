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
//    fetch-add, the lanes take consecutive slices. Whoever takes the last
//    slice replaces the block in the buffer. Lanes that got nothing (block
//    exhausted or not installed yet) go on alone, one fetch-add each.
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
// loops; every retry is per lane. sync() after the broadcast orders each
// lane after the leader's acquire; in free, sync() before the leader's
// release orders every lane's writes before it.
//
// Rare paths (refills, large requests, frees that recycle) are out of line,
// so each call site inlines only the fast path. That saves code, not
// registers: ptxas keeps a caller's live values in registers above an
// out-of-line callee's, so a kernel that calls malloc needs about the fast
// path's live values plus the refill path's own (~80 on sm_90; inlining
// everything is no better). Indices are 32-bit and the block counters 32-bit
// words for that reason (a 64-bit add on a generic pointer also costs a
// shared-memory check).
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
    if (r.k == 0) return malloc_large(L, a.begin, bytes);
    const class_info ci = L.cls[r.c];
    const std::uint32_t total = g.size() * r.k;
    std::uint64_t got = no_slices;
    if (g.is_leader()) got = take_for_group(L, a.begin, r.c, ci, total);
    got = g.broadcast(got);
    g.sync();  // every lane is ordered after the leader's acquire
    if (got == no_slices) return malloc_slow(L, a.begin, r);
    const std::uint64_t block_mask = (std::uint64_t{1} << ci.block_log2) - 1;
    const auto before = static_cast<std::uint32_t>(got & block_mask);  // slices taken before this group
    const std::uint32_t first = before + g.rank() * r.k, n = 1u << ci.count_log2;
    void* p = first + r.k <= n ? a.begin + L.data_offset + (got & ~block_mask) +
                                     (std::uint64_t{first} << (gallatin_parts::min_slice_log2 + r.c))
                               : nullptr;
    if (g.is_leader() && (r.k > 1 || before + total >= n)) settle(L, a.begin, r, g.size(), got);
    return p != nullptr ? p : malloc_slow(L, a.begin, r);
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

  // The group leader's fetch-add on its SM's current block of class c:
  // returns the block's data offset | the slices taken before, or no_slices.
  GPUALLOC_HD static std::uint64_t take_for_group(const gallatin_parts::layout& L, std::byte* arena, std::uint32_t c,
                                                  gallatin_parts::class_info ci, std::uint32_t total) {
    using namespace gallatin_parts;
    const block_buffers buffers(L, arena);
    const std::uint32_t ref = block_buffers::ref_of(buffers.slot(buffers.my_slot(c)).load(detail::relaxed));
    if (ref == slot_empty || ref == slot_busy) return no_slices;
    const slices S(L, arena);
    const std::uint32_t block = ref - 1;
    const std::uint32_t before = S.take(block, total);
    if (tag_of(before) != class_tag(c)) {
      S.give_back_foreign(block, before, total);
      return no_slices;
    }
    const std::uint32_t start = before & count_mask;
    if (start >= 1u << ci.count_log2) return no_slices;
    return S.offset(block, ci.block_log2) | start;
  }

  // The leader, after its group took `got`: replaces the block if the group
  // took its last slice, credits the runs' extra slices and what did not fit.
  __attribute__((noinline)) GPUALLOC_HD static void settle(const gallatin_parts::layout& L, std::byte* arena, request r,
                                                           std::uint32_t lanes, std::uint64_t got) {
    using namespace gallatin_parts;
    const class_info ci = L.cls[r.c];
    const std::uint64_t block_mask = (std::uint64_t{1} << ci.block_log2) - 1;
    const auto before = static_cast<std::uint32_t>(got & block_mask);
    const std::uint32_t n = 1u << ci.count_log2, total = lanes * r.k;
    const std::uint64_t base = got & ~block_mask;
    const segment_table T(L, arena);
    const std::uint32_t block =
        T.block_id(static_cast<std::uint32_t>(base >> L.segment_log2),
                   static_cast<std::uint32_t>((base & (L.segment_bytes() - 1)) >> ci.block_log2));
    if (before + total >= n) {
      // Our slices keep the block from being recycled, so the slot still
      // naming it means it still holds this install.
      const block_buffers buffers(L, arena);
      const std::uint32_t i = buffers.my_slot(r.c);
      const std::uint64_t seen = buffers.slot(i).load(detail::relaxed);
      if (block_buffers::ref_of(seen) == block + 1) buffers.replace(r.c, i, seen);
    }
    const std::uint32_t room = (n - before) / r.k;
    const std::uint32_t fit = room < lanes ? room : lanes;
    const std::uint32_t lost = before + total > n ? n - before - fit * r.k : 0;
    const std::uint32_t credit = fit * (r.k - 1) + lost;
    if (credit != 0) slices(L, arena).give_back(block, credit);
  }

  // One lane takes r.k slices from `block` alone; `spent` says the block is
  // exhausted (or used otherwise) and its slot should get a new one.
  GPUALLOC_HD static void* take_alone(const gallatin_parts::layout& L, std::byte* arena, request r, std::uint32_t block,
                                      bool& spent) {
    using namespace gallatin_parts;
    const class_info ci = L.cls[r.c];
    const slices S(L, arena);
    const std::uint32_t n = 1u << ci.count_log2;
    const std::uint32_t before = S.take(block, r.k);
    spent = true;
    if (tag_of(before) != class_tag(r.c)) {
      S.give_back_foreign(block, before, r.k);
      return nullptr;
    }
    const std::uint32_t start = before & count_mask;
    if (start + r.k > n) {
      if (start < n) S.give_back(block, n - start);
      return nullptr;
    }
    spent = start + r.k == n;
    if (r.k > 1) S.give_back(block, r.k - 1);
    return arena + L.data_offset + S.offset(block, ci.block_log2) + (std::uint64_t{start} << (min_slice_log2 + r.c));
  }

  // A lane the group could not serve: its SM's slot until it gets slices,
  // installing or replacing the block as needed (K1, K2). With no block left
  // for the class, any other slot's block, then NULL.
  __attribute__((noinline)) GPUALLOC_HD static void* malloc_slow(const gallatin_parts::layout& L, std::byte* arena,
                                                                 request r) {
    using namespace gallatin_parts;
    const block_buffers buffers(L, arena);
    const std::uint32_t i = buffers.my_slot(r.c);
    detail::backoff wait;
    for (;;) {
      const std::uint64_t seen = buffers.slot(i).load(detail::relaxed);
      const std::uint32_t ref = block_buffers::ref_of(seen);
      if (ref == slot_busy) {
        wait.pause();
        continue;
      }
      if (ref == slot_empty) {
        if (!buffers.replace(r.c, i, seen) &&
            block_buffers::ref_of(buffers.slot(i).load(detail::relaxed)) == slot_empty)
          return take_anywhere(L, arena, r);
        continue;
      }
      bool spent = false;
      void* p = take_alone(L, arena, r, ref - 1, spent);
      if (spent) buffers.replace(r.c, i, seen);
      if (p != nullptr) return p;
    }
  }

  // Out of blocks for class r.c: slices from whichever slot still has some.
  GPUALLOC_HD static void* take_anywhere(const gallatin_parts::layout& L, std::byte* arena, request r) {
    using namespace gallatin_parts;
    const block_buffers buffers(L, arena);
    const class_info ci = L.cls[r.c];
    for (std::uint32_t i = ci.first_slot; i <= ci.first_slot + ci.slot_mask; ++i) {
      const std::uint32_t ref = block_buffers::ref_of(buffers.slot(i).load(detail::relaxed));
      if (ref == slot_empty || ref == slot_busy) continue;
      bool spent = false;
      if (void* p = take_alone(L, arena, r, ref - 1, spent)) return p;
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
