// sm-slab: this project's own slab allocator, built to be the default. Full
// reuse at close to the cost of a warp-aggregated bump pointer: one
// fetch-add per group of lanes on the fast path, on a word that names the
// block and the position at once (P1), and one fetch-and on a block in its
// second pass or later; one fetch-or and one subtraction per group and
// bitmap word on free.
//
// Learnt from Gallatin (McCoy & Pandey 2024: segments in a 64-ary bit tree,
// per-SM block buffers, one atomic per warp and size class) and LLVM libc's
// GPU allocator (slabs with a free bitmap that is the truth of ownership);
// the protocol below is this project's.
//
// The heap is cut into segments (layout.h), free ones in the segment tree
// (detail/bit_tree.h; each SM searches it from a start of its own,
// blocks.h search_start). A block is one segment, or for larger classes an
// aligned span of up to 64 (so that it holds ~512 objects: layout.h),
// formatted for a size class c (16 B .. half a segment): K objects, a free
// bitmap and a count, in its first segment's record (blocks.h). Per class
// and SM a slot pair holds the current block, with the position of its
// pass, and the next one. Spans add nothing to the fast path: slots and
// object addresses name the head; only free() of an object in a span's
// tail loads one more kind.
//
// malloc(bytes):
//  - up to half a segment: its class c (16, 32, 48, 64, 80, 96 ... B: layout.h). The lanes of one
//    class form a group; its leader adds the group's size to its SM's
//    current word (P1) and clears the bits of the positions it got (one
//    fetch-and per word: one or two; none in a fresh block's first pass,
//    whose positions are all free: blocks.h B1); lanes take the objects
//    whose bits were free, in rank order. Lanes left over (the block ran
//    out, or a reused block's bit was live) go on alone, one position at a
//    time.
//    The leader whose positions cross K/2 fetches the next block into the
//    empty `next` (prefetch); the one whose positions reach K promotes
//    `next` to current (refill).
//  - above: a run of whole segments from the back of the tree.
// free(p): the segment's kind gives the class (a span's tail names its
// head, whose kind does), hence the object and its bit. Lanes on the same
// bitmap word combine their bits: one fetch-or and one subtraction per
// group.
// Retired blocks go back to the tree when all of a block is free (B2), and
// come back into use with any object free when a request of their class
// finds no other block (queued per class, blocks.h Q1, Q3).
//
// Slot pair (slot_pair, layout.h):
//  P1 `current` is [position:32 | block]: a claim adds its lanes to the
//     position with one fetch-add, which returns the block (segment, width,
//     whether it is fresh: layout.h slot_word) and the positions it got
//     together. (Against a cursor in the block's record, which a claim
//     reached after loading `current`: 2^20 requests of one size, 16 B to
//     8 KiB, took the same time within 4 %; 16 B churn on 2 GiB ran a round
//     in 112 ms instead of 554 at 95 % live, 51 instead of 192 at 90 %;
//     H200.) `next` is also the pair's lock: whoever moves it from a block
//     or `empty` to `busy` (one compare-and-swap) owns the pair until it
//     stores `next` again, and is the only one that changes current's
//     block half. It does so with an exchange, so it learns the final
//     position of the pass it ends and settles the positions nobody took
//     (blocks.h B3, end_pass). Every install advances the block half's
//     sequence (5 bits), so a thread that saw a pass exhausted replaces
//     that install, not a later one of the same block; where the sequence
//     wraps, it ends a later pass early, which the exchange settles like
//     any other. Outside a hold, `next` carries current's install (the
//     low half of `current`) in its high half: a holder that changes
//     current stores the new one when it lets go. So a refill reads `next`
//     alone, relaxed, and a compare-and-swap that finds the word it read
//     takes the lock knowing that current still holds the block it found
//     exhausted, whatever happened in between (the install says which
//     block and which pass); it reads current only while the pair is held.
//     (Before, a refill read current, then `next`, then current again
//     under the lock, and started the pass there; the old block was
//     settled before the lock went. 2^20 requests on a fresh 16 GiB heap,
//     H200, medians of 5, x `atomic`: 4 KiB 3.8x -> 2.8x, 8 KiB 4.2x ->
//     3.0x, 16 B 2.2x either way. A version whose waiters read `next` with
//     acquire put a quarter of an 8 KiB kernel's stall samples on the L1
//     invalidations those loads issue; ncu.)
//  P2 A refill, under the lock and only if `current` still holds the block
//     its caller found exhausted: `next`'s block, else a queued or fresh
//     one (blocks.h get), becomes current, and the old block is retired.
//     With no block left, current becomes empty (the exhausted block is
//     retired: later adds land on a word that names none) and malloc sweeps
//     (P6), then tries the other slots of its class, then says NULL. A
//     refill that finds current so empty says so without the lock when no
//     block is in any `next` (P4's count) and its class's queue and the
//     tree are empty, or when it waited for the lock behind a refill that
//     took it after this one began and left current as empty (that one
//     looked, later than this one's request, and found nothing; if that
//     holder was a sweep (P6) instead, the request goes on to P6 too, as
//     after any refill that says nothing is left). Otherwise
//     every failing lane took the lock of its SM's slot in turn to find
//     nothing: 2^20 requests of 256 B on 64 MiB (two slots for 132 SMs,
//     790,016 of them NULL) took 3.5 s, 3.0 ms without the lock once the
//     heap was empty; mixed sizes, whose refills find a tree that still
//     holds fragments, took 1.2 s (16 B - 4 KiB) and 1.9 s (16 - 256 B)
//     before waiters trusted the refill they waited for. (H200.)
//  P3 A prefetch takes the lock only from an empty `next`, so it never
//     waits; one leader per block crosses K/2. Its class is in demand, so
//     its block may be wide (layout.h wide blocks); a refill's never is.
//     The block it puts there has its pass started (blocks.h get: +K,
//     and its width in `next`), so the refill that promotes it only
//     exchanges current; no position of it is out until then. (A
//     prefetch right after each refill instead gained nothing: 16 B
//     2.1x -> 2.3x `atomic`, 4 KiB 4.5x -> 4.4x, 8 KiB 9.7x
//     -> 12x; H200, 16 GiB. Crossing K/4 or the pass's first position
//     instead of K/2 (2026-12-06): 8 KiB 0.210 -> 0.206 and
//     0.208 ms, 1 KiB 7-10 % faster, but warm 4 KiB 0.148 -> 0.185 and
//     0.219 ms and mixed sizes up to 13 % (fresh) and 36 % (warm)
//     slower; 2^20 requests, 16 GiB, H100, medians of 7 over two rounds.
//     Likely why 8 KiB does not move:
//     an SM's 16 resident warps claim its 512 objects in one round, so
//     the refill waits for the prefetch wherever it starts.)
//  P4 A refill that finds no block (the tree and its class's queue empty)
//     takes every pair's `next` block back (one compare-and-swap from the
//     word it read to empty: the pair's lock is free and no position of
//     the block is out) and ends its pass with none taken (blocks.h
//     end_pass), then tries once more. Then only the current blocks of
//     other classes stand between a request and the whole heap (P6). A
//     count of the blocks in `next` words (raised after a prefetch stores
//     one, lowered when a refill or this takes one) lets a refill skip the
//     walk over every pair when there are none: on a
//     heap that has run dry, every failing refill walked all the pairs
//     (2,054 on 4 GiB and 132 SMs; 4,928 with half the arena in slots).
//  P5 A block started with many objects live (reused from its queue) gets a
//     width in its current word: a group of n lanes claims n << width
//     positions (it tries the first 64, two bitmap words, and settles the
//     rest untried: blocks.h take), so it still finds about n free objects
//     in one add; the leader gives back what it got beyond n (a fetch-or and
//     a subtraction, on such blocks only). A lane alone claims 2^width.
//     The width comes from the block's free share when its pass starts: 0
//     from 3/4 free (fresh blocks), 1 from 3/8, else 2.
//  P6 A lane alone whose refill found no block, and a run that found no
//     room, sweep once before they give up: every slot pair's `next` block
//     goes back (as in P4), and so does the current block of every other
//     class that holds no live object (blocks.h idle), each under its
//     pair's lock (taken only while free: a held pair is in use): current
//     is exchanged for an empty word marked closed; once the lock is gone
//     the pass is settled and the block retired (blocks.h end_pass), and
//     its span goes back to the tree. So a class that runs the heap dry
//     gets back what other classes' idle blocks held, and the slots may
//     buffer more than the heap could spare at once (layout.h
//     slot_budget). A closed current word, unlike the empty one a refill
//     that found nothing leaves, makes requests refill instead of giving
//     up. One sweep at a time walks every pair, outside any pair's lock;
//     whoever fails meanwhile waits for its end (bounded) and looks again.
//     After a sweep that let nothing go, failing requests skip sweeps for
//     eight times as long as it took, so a heap full of live objects says
//     NULL fast. Then (whatever its sweep did) a lane scavenges its class's
//     blocks (blocks.h Q3) and looks again while that queues blocks.
//     In refill, under a pair's lock, the sweep raised the registers of
//     every kernel that allocates from 112 to 136 (ptxas, the benchmark's
//     kernel joined at load): half the warps per SM, 16 B requests 1.7x
//     slower (H100).
//
// Warp rules: group operations (partition, broadcast, sums, sync) happen
// before any lane returns or loops apart; the leaders' retries (refill, a
// reused block's live bits) are rounds of the whole partition, which votes
// after each (claim_objects says why). The groups of one
// partition make them together in malloc (the *_across forms,
// detail/warp.h): one warp operation serves every class of a mixed warp.
// In free, the groups of bitmap words combine their bits together
// (lane_group::union_to_leader_across: five rounds of one shuffle for the
// warp). Before, each group summed its bits with a shuffle per lane, which
// groups of different masks made one mask after another: 2^20 frees on a
// fresh 16 GiB heap, H100, medians of 7 over three rounds, x the kernel
// without allocation: 16 - 64 B 5.72x -> 4.50x, 16 - 256 B 5.69x -> 4.65x,
// 16 B - 4 KiB 6.45x -> 5.74x, 16 B - 8 KiB 6.59x -> 5.86x; one size (a
// group is the whole warp) within 1 %. (A sum across the groups tried
// earlier, in a form not kept, had gained nothing: 16 B - 8 KiB 0.043 ms
// either way, 16 - 64 B 0.038 -> 0.041; H200.) sync_across() after the
// broadcast orders each lane after its leader's acquire; in free, before
// the leader's release, every lane's writes before it.
//
// Rare paths (refill, prefetch, lanes alone, runs, settlements of missed
// positions and the count's transitions) are out of line. Rare is not
// free: on a fresh heap each slot's first refill runs its path from code
// the SM's instruction caches do not hold, and a kernel of one 16 B
// request spent 45 % of its stall samples on instruction fetch, most at
// the ends of the rare blocks inlined in blocks.h get that the path jumps
// over (ncu PC sampling, H100, 2026-12-08): about half of the 10 us a
// small launch pays over `atomic` (README, Status). Registers: a
// call does not give the caller's registers to the callee; ptxas keeps the
// values live across it in registers of their own, so a kernel needs the
// sum of the frames along its deepest call chain (a kernel that calls one
// function alone, ptxas 13.0, sm_90: the leader's claim, made out of line, 86;
// refill 56; get 38; the front end adds about 30). The benchmark's
// allocation kernel runs with 118 (ncu, H100, the joined module,
// 2026-12-07; 114 on 2026-12-06, 124 on 2026-12-03), two blocks of 256 threads per SM where
// `atomic`'s 61 allow four. Capping the module at 64 (--maxrregcount at compile time,
// which spills around the slow calls) took 16 B requests from 2.03x to
// 1.86x `atomic` but 256 B from 1.82x to 2.66x, and examples/divisors'
// allocating kernel from 5.58 to 3.48 ms (`atomic`: 2.00). Taking get out
// of line and giving it one call site in refill took the count from 110 to
// 100 (before spans); inlining refill into the lane-alone path, or release
// into its callers, made it worse. Spans add the aligned run search inside
// get (inlined there: bit_tree.h says why). Calls through a pointer ptxas
// cannot resolve follow the ABI, so a kernel needs the largest frame, not
// the sum: checked mode's retry and the second whole malloc it makes
// (allocate.h), called so, took the benchmark's allocating kernel from 122
// to 90 registers, examples/divisors' from 139 to 128 (unpinned) and its
// allocating time from 5.5 to 3.3 ms. But every function the kernel
// reaches then saves the registers it uses (refill 84 bytes), and at the
// same two blocks per SM requests of 256 B to 8 KiB took 16-17 % longer on
// a fresh heap and 17-35 % warm, 16 and 64 B 10 % less warm (2^20
// requests, 16 GiB, H100, medians of 7 over two rounds, 2026-12-06). Not
// kept.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/bit_field.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/detail/clock.h"
#include "gpualloc/detail/sm.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"
#include "gpualloc/strategies/sm_slab/blocks.h"
#include "gpualloc/strategies/sm_slab/layout.h"
#include "gpualloc/strategy.h"

namespace gpualloc::strategies {

struct sm_slab {
  struct state {
    sm_slab_parts::layout L;
  };

  static constexpr int init_phases = 1;

  static void plan(state& s, const arena& a, const device_facts& facts) {
    s.L = sm_slab_parts::layout::make(a.bytes, facts.sm_count);
  }

  GPUALLOC_HD static void init(state& s, const arena& a, int /*phase*/, std::uint64_t thread, std::uint64_t threads) {
    const sm_slab_parts::layout& L = s.L;
    sm_slab_parts::blocks(L, a.begin).init(thread, threads);
    auto* pairs = reinterpret_cast<sm_slab_parts::slot_pair*>(a.begin + L.slots_offset);
    // Current words start closed (P6): no refill has looked yet, so the
    // requests that meet a slot before its first refill ends wait for it
    // without P2's looks for a heap run dry (two loads a turn of the wait:
    // ncu put 9 % and 8.5 % of the stall samples of 2^20 requests of 16 B
    // and of 16 B - 8 KiB on a fresh 16 GiB heap there, H100); `next`
    // carries current's install (P1).
    constexpr std::uint64_t unfilled = sm_slab_parts::slot_word::block(sm_slab_parts::no_segment, closed_width, false);
    for (std::uint64_t i = thread; i < L.slot_count; i += threads) pairs[i] = {unfilled, unfilled << 32};
    if (thread == 0) {
      next_blocks(L, a.begin).value = 0;
      sm_slab_parts::blocks(L, a.begin).shared() = {};
    }
  }

  GPUALLOC_HD static void* malloc(state& s, const arena& a, std::uint64_t bytes, const detail::lane_group& group) {
    using namespace sm_slab_parts;
    const layout& L = s.L;
    if (L.segments == 0) return nullptr;
    const std::uint32_t c = class_of(bytes);
    // The groups of every class go on together: one shuffle serves them all.
    const detail::lane_group g = group.partition(c < L.classes ? c : L.classes, c < L.classes);
    if (c >= L.classes) return malloc_large(L, a.begin, bytes);
    std::uint64_t grant = 0, got = 0;  // grant: [segment:32 | first position:32]; got: bits of objects from it
    // The leaders claim until each has its objects or knows there are none;
    // a retry is a round of the whole partition (claim_objects).
    bool again = g.is_leader();
    do {
      if (again) again = claim_objects(L, a.begin, c, g.size(), grant, got);
    } while (g.any_across(again));
    grant = g.broadcast_across(grant);
    got = g.broadcast_across(got);
    g.sync_across();  // every lane is ordered after its leader's acquire
    if (g.rank() < detail::popcount(got))
      return blocks(L, a.begin)
          .object(static_cast<std::uint32_t>(grant >> 32), c,
                  static_cast<std::uint32_t>(grant) + detail::nth_set_bit(got, g.rank()));
    return malloc_alone(L, a.begin, c);
  }

  GPUALLOC_HD static void free(state& s, const arena& a, void* p, const detail::lane_group& group) {
    using namespace sm_slab_parts;
    const layout& L = s.L;
    const blocks B(L, a.begin);
    const auto offset = static_cast<std::uint64_t>(static_cast<std::byte*>(p) - B.data());
    auto seg = static_cast<std::uint32_t>(offset >> L.segment_log2);
    std::uint32_t kind = B.kind_of_live(seg);
    if (is_tail(kind)) {  // a span's tail names its head and class
      seg -= tail_offset(kind);
      kind = tail_class(kind);
    }
    const bool run = (kind & kind_run) != 0;
    const std::uint32_t i = run ? 0 : L.object_index(kind, offset - (std::uint64_t{seg} << L.segment_log2));
    const std::uint64_t key = run ? std::uint64_t{1} << 63 | seg : std::uint64_t{seg} << 32 | i / 64;
    const detail::lane_group g = group.partition(key, !run);
    if (run) return free_run(L, a.begin, seg);
    const std::uint64_t bits = g.union_to_leader_across(std::uint64_t{1} << (i % 64));
    g.sync_across();  // every lane's writes to its object come before the leader's release
    if (g.is_leader()) B.give_back(seg, i / 64, bits, g.size());
  }

 private:
  GPUALLOC_HD static sm_slab_parts::slot_pair& pair(const sm_slab_parts::layout& L, std::byte* arena, std::uint32_t c) {
    const std::uint32_t i = L.cls[c].first_slot + (detail::sm_id() & L.cls[c].slot_mask);
    return reinterpret_cast<sm_slab_parts::slot_pair*>(arena + L.slots_offset)[i];
  }
  GPUALLOC_HD static detail::device_atomic<std::uint64_t> word(std::uint64_t& w) {
    return detail::device_atomic<std::uint64_t>(w);
  }
  // An empty current word that P6 or init left (width 3): unlike the empty
  // word a refill that found nothing leaves, it says nothing about the heap,
  // so a request that finds it refills instead of giving up.
  static constexpr std::uint32_t closed_width = 3;
  GPUALLOC_HD static bool closed(std::uint64_t w) {
    return sm_slab_parts::slot_word::segment(w) == sm_slab_parts::no_segment &&
           sm_slab_parts::slot_word::width(w) == closed_width;
  }
  // P1: a claim of n units (2^width positions each) on P's current pass; the add names block and positions.
  GPUALLOC_HD static std::uint64_t add_claim(sm_slab_parts::slot_pair& P, std::uint32_t n) {
    return word(P.current).fetch_add(std::uint64_t{n} << sm_slab_parts::slot_word::position_shift, detail::acquire);
  }
  // The objects the add that returned `seen` (on a word naming seg, of K objects) handed out: n units of its pass.
  GPUALLOC_HD static sm_slab_parts::claim take(const sm_slab_parts::blocks& B, std::uint64_t seen, std::uint32_t seg,
                                               std::uint32_t K, std::uint32_t n) {
    using namespace sm_slab_parts;
    return B.take(seg, K, slot_word::taken(seen), n << slot_word::width(seen), slot_word::fresh(seen));
  }

  // The group leader's claim of objects for up to n lanes from its SM's
  // current block of class c. True if it should claim
  // again (a refill replaced the block, or a reused block's bits were all
  // live); else grant and got (the objects' bits) hold what it got, or got
  // is 0: the class has no block left. Its caller's retry loop is one of the
  // whole partition, with a vote, not the leader's own: ptxas puts a YIELD
  // in a loop's body, and a warp whose leader ran one went on split, its
  // lanes' shuffles after the leader's step the slow kind
  // (WARPSYNC.COLLECTIVE: a fifth of the stall samples of 2^20 requests of
  // 16 B; ncu, H100). With the rounds (2^20 requests, 16 GiB, H100, medians
  // of 7 over two rounds, x `atomic`): 16 B 1.95 -> 1.70 on a fresh heap and
  // 1.54 -> 1.31 warm, 64 B 2.02 -> 1.90 and 1.70 -> 1.55, 16 - 64 B 2.06 ->
  // 1.92 and 1.76 -> 1.57, 16 B - 4 KiB 2.03 -> 2.00 and 1.63 -> 1.53; but
  // 16 B - 8 KiB 2.16 -> 2.32 on a fresh heap, where the lanes of the
  // classes already served wait for the refilling leaders' rounds;
  // examples/divisors' allocating kernel 1.145 -> 1.097 ms. (The first
  // claim written out before the leader's loop instead raised divisors'
  // kernel from 128 registers to 140, one block of 256 threads per SM:
  // 1.16 -> 1.95 ms; H100.)
  // K is read before the claim's acquire: loads cannot
  // move above an acquire, and after it (it invalidates the SM's L1) each
  // load of the layout is a trip to L2; object sizes are computed from the
  // class (layout.h class_units). (2^20 requests, 16 GiB, H200, medians of
  // 9 over two rounds, x `atomic`: 16 B 2.17 -> 2.11 fresh, 2.06 -> 1.93
  // warm; mixed 16 B - 4 KiB 3.17 -> 3.11. Reading the segment size and
  // data offset before it too, for the lanes' pointers, cost registers and
  // was slower: 2.22 and 2.04.)
  GPUALLOC_HD static bool claim_objects(const sm_slab_parts::layout& L, std::byte* arena, std::uint32_t c,
                                        std::uint32_t n, std::uint64_t& grant, std::uint64_t& got) {
    using namespace sm_slab_parts;
    const blocks B(L, arena);
    sm_slab_parts::slot_pair& P = pair(L, arena, c);
    const std::uint32_t class_objects = L.objects(c);
    const std::uint64_t seen = add_claim(P, n);
    const std::uint32_t seg = slot_word::segment(seen), K = class_objects << slot_word::wide(seen);
    if (seg == no_segment) return refill(L, arena, c, P, seen);
    claim r = take(B, seen, seg, K, n);
    const std::uint64_t at = slot_word::taken(seen);
    if (at < K / 2 && at + (n << slot_word::width(seen)) >= K / 2) prefetch(L, arena, c, P);
    if (r.exhausted && !refill(L, arena, c, P, seen) && r.got == 0) return false;
    if (slot_word::width(seen) != 0 && detail::popcount(r.got) > n) r.got = keep_lowest(B, seg, r, n);
    if (r.got == 0) return true;
    got = r.got;
    grant = std::uint64_t{seg} << 32 | r.first;
    return false;
  }

  // A wide claim got more than its n lanes want: the lowest n stay, the rest go back.
  __attribute__((noinline)) GPUALLOC_HD static std::uint64_t keep_lowest(const sm_slab_parts::blocks& B,
                                                                         std::uint32_t seg, sm_slab_parts::claim r,
                                                                         std::uint32_t n) {
    const std::uint64_t keep = detail::lowest_set_bits(r.got, n);
    B.give_back_claimed(seg, r.first, r.got & ~keep);
    return keep;
  }

  // P2: under the pair's lock, taken while current holds `seen`'s block:
  // next's block (its pass started, P3), or a queued or fresh one, becomes
  // current and seen's block is retired. False when current is (left)
  // empty: the class has no block left. True also when someone else
  // changed current first: the caller looks again. The lock goes right
  // after the exchange; the old block's pass is settled after it.
  __attribute__((noinline)) GPUALLOC_HD static bool refill(const sm_slab_parts::layout& L, std::byte* arena,
                                                           std::uint32_t c, sm_slab_parts::slot_pair& P,
                                                           std::uint64_t seen) {
    using namespace sm_slab_parts;
    const std::uint64_t nxt = lock_for_refill(L, arena, c, P, seen);
    if (slot_word::is_busy(nxt)) return nxt == look_again;
    const blocks B(L, arena);
    std::uint32_t block = slot_word::next_block(nxt);
    for (bool reclaimed = false; slot_word::segment(block) == no_segment; reclaimed = true) {  // one call site of get
      block = B.get(c);
      if (slot_word::segment(block) != no_segment || reclaimed || !reclaim_next_blocks(L, arena)) break;  // P4
    }
    const bool installed = slot_word::segment(block) != no_segment;
    std::uint64_t old = 0, now = seen;
    if (installed || slot_word::segment(seen) != no_segment || closed(seen)) {
      now = slot_word::current(seen, block);
      old = word(P.current).exchange(now, detail::acq_rel);
    }
    word(P.next).store(slot_word::next(slot_word::next_busy(nxt), slot_word::install(now), 0), detail::release);
    if (slot_word::segment(old) != no_segment) B.end_pass(slot_word::install(old), c, slot_word::taken(old));
    if (slot_word::segment(nxt) != no_segment) next_blocks(L, arena).add(-1);
    return installed;
  }

  // P2's wait for the pair's lock while current holds `seen`'s block: the
  // `next` word it replaced with busy (the caller holds the pair), or,
  // without the lock, look_again (current no longer holds that block) or
  // nothing_left. It reads `next`, relaxed, which outside a hold carries
  // current's install (P1), and current only while someone holds the pair
  // (a prefetch may hold it long after a refill replaced seen's block).
  // Its sleeps stop growing at 256 ns, not backoff's 1 us: a holder's step
  // is short (a get at most), and a waiter that slept up to a microsecond
  // past its end kept its warp's requests waiting (2^20 requests on a
  // fresh 16 GiB heap, H100, x `atomic`, medians of 7 over three rounds:
  // 1, 4, 8 KiB 1.87x, 1.90x, 1.93x -> 1.82x, 1.83x, 1.86x, 16 B - 4 KiB
  // 1.99x -> 1.95x; warm within the rounds' spread).
  // Out of line: its loop's values stay out of the frame that calls get
  // (registers).
  __attribute__((noinline)) GPUALLOC_HD static std::uint64_t lock_for_refill(const sm_slab_parts::layout& L,
                                                                             std::byte* arena, std::uint32_t c,
                                                                             sm_slab_parts::slot_pair& P,
                                                                             std::uint64_t seen) {
    using namespace sm_slab_parts;
    detail::backoff wait(256);
    const std::uint64_t first = word(P.next).load(detail::relaxed);
    bool behind_later = false;  // a holder that took the lock after `first` held it meanwhile
    const bool dry = slot_word::segment(seen) == no_segment && !closed(seen);  // a refill found nothing
    for (std::uint64_t nxt = first;; nxt = word(P.next).load(detail::relaxed)) {
      const bool busy = slot_word::is_busy(nxt);  // then current says whether a holder replaced seen's block
      const std::uint32_t install =
          busy ? slot_word::install(word(P.current).load(detail::relaxed)) : slot_word::current_install(nxt);
      if (install != slot_word::install(seen)) return look_again;
      if (dry && blocks(L, arena).looks_exhausted(c) &&
          detail::device_atomic<std::int64_t>(next_blocks(L, arena).value).load(detail::relaxed) <= 0)
        return nothing_left;  // nothing has come back since
      behind_later |= busy && nxt != first;
      if (!busy) {
        if (dry && behind_later) return nothing_left;  // a refill that began after this one found nothing
        if (word(P.next).compare_exchange_strong(nxt, slot_word::next_busy(nxt), detail::acquire, detail::relaxed))
          return nxt;
      }
      wait.pause();
    }
  }
  // lock_for_refill's answers without the lock: busy words no lock hands back.
  static constexpr std::uint64_t look_again = ~std::uint64_t{0};
  static constexpr std::uint64_t nothing_left = sm_slab_parts::slot_word::segment_part;

  // P3: a block into an empty `next`, unless someone holds the pair.
  __attribute__((noinline)) GPUALLOC_HD static void prefetch(const sm_slab_parts::layout& L, std::byte* arena,
                                                             std::uint32_t c, sm_slab_parts::slot_pair& P) {
    using namespace sm_slab_parts;
    std::uint64_t nxt = word(P.next).load(detail::relaxed);
    if (slot_word::next_block(nxt) != 0 ||  // a block, or busy
        !word(P.next).compare_exchange_strong(nxt, slot_word::next_busy(nxt), detail::acquire, detail::relaxed))
      return;
    const std::uint32_t block = blocks(L, arena).get(c, true);  // wide blocks: half of one is out
    word(P.next).store(slot_word::next(slot_word::next_busy(nxt), slot_word::current_install(nxt), block),
                       detail::release);
    if (slot_word::segment(block) != no_segment) next_blocks(L, arena).add(1);
  }

  // A lane its group could not serve: one position at a time from its SM's
  // current block; with no block left for the class, any other slot's, then NULL.
  __attribute__((noinline)) GPUALLOC_HD static void* malloc_alone(const sm_slab_parts::layout& L, std::byte* arena,
                                                                  std::uint32_t c) {
    using namespace sm_slab_parts;
    const blocks B(L, arena);
    sm_slab_parts::slot_pair& P = pair(L, arena, c);
    for (bool swept = false;;) {
      const std::uint64_t seen = add_claim(P, 1);
      const std::uint32_t seg = slot_word::segment(seen);
      if (seg != no_segment) {
        const claim r = take(B, seen, seg, L.objects(c, slot_word::wide(seen)), 1);
        if (r.exhausted) refill(L, arena, c, P, seen);
        if (r.got != 0) return one_object(B, seg, c, r);
        if (!r.exhausted) continue;
        if (const std::uint64_t now = word(P.current).load(detail::relaxed);
            slot_word::segment(now) != no_segment || closed(now))
          continue;
      } else if (refill(L, arena, c, P, seen)) {
        continue;
      }
      if (!swept && close_idle_blocks(L, arena, c)) {  // P6
        swept = true;
        continue;
      }
      // blocks.h Q3, whatever P6 did (it may only have waited for another's
      // sweep), and again while it queues blocks: other SMs may dequeue them
      // first. Also while the class's queue holds entries: scavengers share
      // the windows, so one finds none in its share while others queue
      // blocks, and the next refill dequeues one (or drops a stale entry).
      // (Without it, 16 B churn at 95 % of 2 GiB saw NULLs in round 1 in 3
      // of 6 runs once blocks.h B1's first pass made requests faster; with
      // it, none in 4; H200.) Each round that goes on queued or dequeued a
      // block, so the heap makes progress; no count bounds it (a counter
      // here took the allocation kernels from 128 to 130 registers).
      if (B.scavenge(c) || B.any_queued(c)) continue;
      return take_anywhere(L, arena, c);
    }
  }

  // Out of blocks for class c: an object from whichever slot's current block has one left.
  GPUALLOC_HD static void* take_anywhere(const sm_slab_parts::layout& L, std::byte* arena, std::uint32_t c) {
    using namespace sm_slab_parts;
    const blocks B(L, arena);
    auto* pairs = reinterpret_cast<sm_slab_parts::slot_pair*>(arena + L.slots_offset);
    for (std::uint32_t i = L.cls[c].first_slot; i <= L.cls[c].first_slot + L.cls[c].slot_mask; ++i) {
      for (std::uint64_t w = word(pairs[i].current).load(detail::relaxed);
           slot_word::segment(w) != no_segment && slot_word::taken(w) < L.objects(c, slot_word::wide(w));
           w = word(pairs[i].current).load(detail::relaxed)) {  // a load first: exhausted passes get no adds
        const std::uint64_t seen = add_claim(pairs[i], 1);
        const std::uint32_t seg = slot_word::segment(seen);
        if (seg == no_segment) break;
        if (const claim r = take(B, seen, seg, L.objects(c, slot_word::wide(seen)), 1); r.got != 0)
          return one_object(B, seg, c, r);
      }
    }
    return nullptr;
  }

  // The object of a one-lane claim: the lowest it got (a wide claim's others go back, P5).
  __attribute__((noinline)) GPUALLOC_HD static void* one_object(const sm_slab_parts::blocks& B, std::uint32_t seg,
                                                                std::uint32_t c, sm_slab_parts::claim r) {
    if (detail::popcount(r.got) > 1) r.got = keep_lowest(B, seg, r, 1);
    return B.object(seg, c, r.first + detail::nth_set_bit(r.got, 0));
  }

  // P4: the tree is empty: every slot pair's `next` block (no position of
  // its pass out) goes back (its pass ended, the block retired: to the
  // tree, or to its class's queue when objects of it are live). True if
  // any went.
  __attribute__((noinline)) GPUALLOC_HD static bool reclaim_next_blocks(const sm_slab_parts::layout& L,
                                                                        std::byte* arena) {
    using namespace sm_slab_parts;
    const blocks B(L, arena);
    auto* pairs = reinterpret_cast<sm_slab_parts::slot_pair*>(arena + L.slots_offset);
    if (detail::device_atomic<std::int64_t>(next_blocks(L, arena).value).load(detail::relaxed) <= 0) return false;
    bool any = false;
    for (std::uint64_t i = 0; i < L.slot_count; ++i) {
      std::uint64_t nxt = word(pairs[i].next).load(detail::relaxed);
      const std::uint32_t seg = slot_word::segment(nxt);
      const std::uint64_t emptied = slot_word::next_emptied(nxt);
      if (seg == no_segment ||
          !word(pairs[i].next).compare_exchange_strong(nxt, emptied, detail::acq_rel, detail::relaxed))
        continue;
      next_blocks(L, arena).add(-1);
      B.end_pass(slot_word::next_block(nxt), B.kind(seg), 0);
      any = true;
    }
    return any;
  }

  // P6 for a request of class c (L.classes for a run): one thread sweeps
  // at a time; one that finds a sweep running waits for its end (bounded)
  // instead of starting another. After a sweep that let nothing go, none
  // starts for eight times as long as it took: on a heap full of live
  // objects every failing request swept (2^20 requests of 256 B on a 64 MiB
  // heap took 6.4 s, H100). True if its caller should look once more.
  __attribute__((noinline)) GPUALLOC_HD static bool close_idle_blocks(const sm_slab_parts::layout& L,
                                                                      std::byte* arena, std::uint32_t c) {
    using namespace sm_slab_parts;
    shared_state& S = blocks(L, arena).shared();
    detail::device_atomic<std::uint32_t> sweeps(S.sweeps);
    detail::device_atomic<std::uint64_t> barren_until(S.barren_until);
    const std::uint64_t start = detail::now_ns();
    if (start < barren_until.load(detail::relaxed)) return false;
    std::uint32_t seen = sweeps.load(detail::acquire);  // odd: a sweep is running
    if (seen % 2 == 0 && sweeps.compare_exchange_strong(seen, seen + 1, detail::acq_rel, detail::acquire)) {
      auto* pairs = reinterpret_cast<slot_pair*>(arena + L.slots_offset);
      bool any = false;
      for (std::uint64_t i = 0; i < L.slot_count; ++i) any |= let_go_idle(L, arena, pairs[i], c);
      if (const std::uint64_t end = detail::now_ns(); !any) barren_until.store(end + 8 * (end - start), detail::relaxed);
      sweeps.store(seen + 2, detail::release);
      return any;
    }
    if (seen % 2 == 0) return true;  // a whole sweep began and ended since the first load
    detail::backoff wait;
    for (std::uint32_t i = 0; i < max_sweep_waits && sweeps.load(detail::acquire) == seen; ++i) wait.pause();
    return true;
  }
  // ~64 ms at the longest pause. One thread's sweep walks every pair (7,296
  // on a 4 GiB heap) and after mixed sizes lets go of most blocks; with
  // ~16 ms, requests for 16 KiB right after mixed sizes saw NULL with 3.7 %
  // of the heap live (conformance with blocks.h B1's first pass, H200: one
  // run in three; with ~64 ms, none in six).
  static constexpr std::uint32_t max_sweep_waits = 1u << 16;

  // One pair of a sweep (P6): its `next` block (as P4), and its current
  // block if that is idle and not of class c (c's blocks serve its request
  // anyway: take_anywhere), let go; whether any was. Out of line: registers.
  __attribute__((noinline)) GPUALLOC_HD static bool let_go_idle(const sm_slab_parts::layout& L, std::byte* arena,
                                                                sm_slab_parts::slot_pair& Q, std::uint32_t c) {
    using namespace sm_slab_parts;
    const blocks B(L, arena);
    const std::uint64_t cur = word(Q.current).load(detail::relaxed);
    const std::uint32_t seg = slot_word::segment(cur), d = seg == no_segment ? c : B.kind(seg);
    const bool idle = d != c && d < L.classes && B.idle(cur, d);
    std::uint64_t nxt = word(Q.next).load(detail::relaxed);
    do {  // the pair's lock (P1), unless someone holds it: then it is in use
      if (slot_word::is_busy(nxt) || (!idle && slot_word::segment(nxt) == no_segment)) return false;
    } while (!word(Q.next).compare_exchange_weak(nxt, slot_word::next_busy(nxt), detail::acquire, detail::relaxed));
    const std::uint64_t now = word(Q.current).load(detail::relaxed);
    const bool closing = idle && slot_word::install(now) == slot_word::install(cur) && B.idle(now, d);
    std::uint64_t after = now, old = 0;
    if (closing) {
      after = slot_word::current(now, slot_word::block(no_segment, closed_width, false));
      old = word(Q.current).exchange(after, detail::acq_rel);
    }
    word(Q.next).store(slot_word::next(slot_word::next_busy(nxt), slot_word::install(after), 0), detail::release);
    if (closing) B.end_pass(slot_word::install(old), d, slot_word::taken(old));
    if (slot_word::segment(nxt) != no_segment) {
      next_blocks(L, arena).add(-1);
      B.end_pass(slot_word::next_block(nxt), B.kind(slot_word::segment(nxt)), 0);
    }
    return closing || slot_word::segment(nxt) != no_segment;
  }

  GPUALLOC_HD static detail::fill_count& next_blocks(const sm_slab_parts::layout& L, std::byte* arena) {
    return *reinterpret_cast<detail::fill_count*>(arena + L.next_blocks_offset);
  }

  // Above half a segment: a run of whole segments.
  __attribute__((noinline)) GPUALLOC_HD static void* malloc_large(const sm_slab_parts::layout& L, std::byte* arena,
                                                                  std::uint64_t bytes) {
    using namespace sm_slab_parts;
    const std::uint64_t count = (bytes + L.segment_bytes() - 1) >> L.segment_log2;
    if (count > L.segments) return nullptr;
    const blocks B(L, arena);
    std::uint32_t first = B.claim_run(static_cast<std::uint32_t>(count));
    if (first == no_segment && close_idle_blocks(L, arena, L.classes))  // P6
      first = B.claim_run(static_cast<std::uint32_t>(count));
    return first == no_segment ? nullptr : B.data() + (std::uint64_t{first} << L.segment_log2);
  }

  __attribute__((noinline)) GPUALLOC_HD static void free_run(const sm_slab_parts::layout& L, std::byte* arena,
                                                             std::uint32_t first) {
    sm_slab_parts::blocks(L, arena).return_run(first);
  }
};

}  // namespace gpualloc::strategies
