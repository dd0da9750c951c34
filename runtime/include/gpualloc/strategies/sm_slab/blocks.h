// sm-slab's blocks: a span of 2^span_log2(c) segments (one, or up to 64 for
// larger classes: layout.h says why), or 2^wide times that (layout.h wide
// blocks), formatted for size class c is one block of K = objects(c) <<
// wide objects, with a free bitmap (bit set = object free), a count of
// what is outstanding, and a queue per class of blocks worth reusing
// (layout.h). A pass over the block hands out its positions
// 0..K-1 from the current word of the slot that holds it (sm_slab.h P1).
// The block's first segment, its head, names it: its record, bitmap and
// queue entries are the block's, its base is where object 0 lies; the other
// segments of the span (tails) only say where their head is.
//
// Per segment (segment_record):
//   kind    kind_free, the class c (a block's head), tail_kind(c, d) for
//           the segment d after its head (so that free() of an object in a
//           tail reads one kind, not two), or kind_run | n for the first of a
//           run of n segments handed out whole. Written before the memory
//           is handed out (format: tails, then the head) and before the
//           segments go back to the tree (release: tails, then the head);
//           free() reads it (a plain load, kind_of_live) to find an
//           object's head and class.
//   holds   [ticket:32 | in_slot:1 | queued:1 | count:30].
//           count = live objects + positions of the running pass not yet
//           settled (a claimer settles its position when it got the bit,
//           which makes the object live, or credits it back when it did
//           not); in_slot: a slot holds the block; queued: its class's
//           queue holds it. ticket: a new one at every format and enqueue.
//
// Invariants
//  B1 The bitmap is the truth: an object belongs to whoever cleared its set
//     bit (fetch-and), and goes back by setting it (fetch-or). Positions
//     only spread claimers over the bits, so a stale or repeated position
//     can never hand an object out twice. Except in a block's first pass:
//     format clears the bitmap, the slot word that starts the pass says
//     `fresh`, and a claimer owns the positions its add got (each position
//     is added past once). Whoever settles a first pass's position instead
//     (end_pass) sets its bit, as a free does, so when the pass ends the bits
//     are the truth again. (One atomic fewer per group on a fresh block.
//     2^20 requests on 16 GiB, H200, medians of 9, x `atomic`: 16 B 2.57 ->
//     2.28 on a fresh heap and 2.13 -> 2.02 warm, 256 B 2.25 -> 2.16 and
//     1.97 -> 1.81; 4 KiB 3.82 -> 3.86 and 4.52 -> 4.62.)
//  B2 A block is released (its span back to the tree, whole) only by the thread
//     that moves `holds` to count 0 with no flag set, or that clears
//     `queued` at count 0 (one compare-and-swap). Then no object is live, no
//     position is unsettled and no slot or queue holds it, so no one is left
//     who could touch its bits.
//  B3 A position is handed out only by an add on the current word of the
//     slot that holds the block, and the add names the block and the
//     position at once: no claim reaches a block whose pass has ended. The
//     one that ends a pass replaces the word (an exchange, under the pair's
//     lock: sm_slab.h P1), so it learns how many positions were taken and
//     settles the others (end_pass) before the slot lets the block go.
//  B4 count grows only when a pass starts (+K), and a pass starts only on a
//     block a slot holds; a block nobody holds only loses count. So among
//     the threads that lower an unheld block's count, exactly one reaches
//     0.
//  Q1 Only Q3 queues a block. A retired block with objects live stays
//     retired (no free queues it) until all of it is free (B2) or its
//     class runs out of blocks and scavenges it (Q3). (While frees also
//     queued a block once a quarter of it was free, every block that a
//     burst of frees emptied was queued and then released (Q2), and the
//     next kernel's refills dropped the stale entries one at a time, each
//     a chain of atomics on its slot's path. 2^20 requests, 16 GiB, H200, x `atomic`:
//     warm mixed sizes 16-64 B 3.9 -> 2.3, 16 B - 8 KiB 5.8 -> 3.2, warm
//     16 B 2.0 -> 1.7, but warm 8 KiB 4.5 -> 4.9; frees of 16 B 3.6 ->
//     3.2, of 4 KiB 4.7 -> 3.8. Churn on 2 GiB held as before: 16 B at 95 %
//     and 16 B - 4 KiB at 80 % live for 20 rounds, 106 and 26 ms a round
//     (106 and 30 before); on 256 MiB, 16 B - 4 KiB at 70 % said its first
//     NULL in round 2 instead of round 7.)
//     A queue entry is a hint: a refill dequeues a segment and takes it
//     only if it is queued and formatted for the refill's class, by a
//     compare-and-swap from queued to in_slot that it retries while the
//     ticket it first read stays (no format or enqueue in between) and the
//     block stays queued; otherwise the entry is stale (the block was
//     released, or queued anew, maybe for another class) and is dropped.
//     (Not retried, a compare-and-swap that lost to a free dropped the
//     entry of a block still queued, and that block served no request
//     until all of it was free: 16 B blocks under churn ran out from 50%
//     live.)
//     The pass starts (+K) when a slot takes the block (get), into `next`
//     or current, but positions come only from current, so a block waiting
//     in `next` can be let go again with none taken (end_pass, sm_slab.h P4).
//  Q2 A queued block whose last object comes back is released at once (B2),
//     so every byte freed can serve any class again; its entry goes stale.
//     A queue's room counts reserved entries not yet dequeued, so a ring of
//     one entry per segment never overflows and an enqueue never waits for
//     room.
//  Q3 A request that its class cannot serve (no block in the tree or the
//     class's queue; after P6's sweep, whatever that did: sm_slab.h)
//     scavenges: it queues every retired block of its class with any
//     object free in the next window of 64 segments that has one: room
//     first, then one compare-and-swap from the holds it read (no flag,
//     0 < count < K, its ticket) to queued with a new ticket; a format, a
//     release or another scavenger in between changes the word, so the
//     swap fails. The kind it checks is read after holds (acquire), and a
//     value it acts on (no flag) was written with release by a thread
//     ordered after the format (by the install that followed it: memory
//     ordering, below), so the kind is that of the life the ticket names
//     or of a later one; then
//     the swap fails, or (a race the memory model allows) queues the block
//     of the earlier life in c's queue, where its entry is stale: dequeue
//     drops it, and Q2 releases the block once all of it is free.
//     Scavengers share a cursor over the windows; one gives up when the
//     windows handed out since it began cover the heap. Its next refill
//     dequeues one of the blocks, unless other SMs' refills took them
//     first: then it scavenges again.
//     (Called from the refill instead, or installing the block itself, it
//     raised the benchmark's allocation kernels from 128 to 130-138
//     registers, one 256-thread block per SM instead of two: 16 B requests
//     1.7x slower on an H200.)
//
// Memory ordering: a pass starts with `holds` and the bitmap written, then
// the slot's current word exchanged with release (sm_slab.h); a claim's add
// on it is acquire, so the claimer sees both. Bits: fetch-or release (the
// freer's writes go with the object; on the device through a release fence
// before it, which also serves the decrement: give_back), fetch-and acquire.
// `holds`: every read-modify-write acq_rel (a free's decrement on the device:
// relaxed after that fence, and the releaser fences: free_decrement),
// so the releaser is ordered after every free and settlement before it, and the
// next formatter after the releaser (through the tree, bit_tree.h). Except
// the add that starts a fresh block's first pass (get): relaxed, its result
// unused, so that the refill does not wait for it. The tree claim before it
// already acquired the last life's release; the value it writes has in_slot
// set, which no reader acts on (Q1, Q3: those want it clear); and whoever
// changes holds next is ordered after the install's release (current's
// exchange, or `next`'s store), which comes after the add and the format.
// (The add acq_rel, its result awaited, was one more trip to memory on the
// path of every refill from the tree.) (A free's
// decrement relaxed, with the releaser waiting for every bit instead, made
// frees slower, not faster: H100, 16 B 0.076 -> 0.14 ms.) Queue entries:
// index_queue.h.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/bit_field.h"
#include "gpualloc/detail/bit_tree.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/detail/index_queue.h"
#include "gpualloc/detail/random.h"
#include "gpualloc/detail/sm.h"
#include "gpualloc/strategies/sm_slab/layout.h"

namespace gpualloc::sm_slab_parts {

inline constexpr std::uint32_t kind_free = 0xffu;
inline constexpr std::uint32_t kind_run = 1u << 31;
inline constexpr std::uint32_t kind_tail = 1u << 30;  // | class << 6 | segments after the head (1 .. 63)
GPUALLOC_INLINE constexpr std::uint32_t tail_kind(std::uint32_t c, std::uint32_t d) { return kind_tail | c << 6 | d; }
GPUALLOC_INLINE constexpr bool is_tail(std::uint32_t kind) { return (kind >> 30) == (kind_tail >> 30); }
GPUALLOC_INLINE constexpr std::uint32_t tail_class(std::uint32_t kind) { return kind >> 6 & 63; }
GPUALLOC_INLINE constexpr std::uint32_t tail_offset(std::uint32_t kind) { return kind & 63; }
static_assert(max_classes <= 64 && max_span_log2 <= 6, "a tail's kind holds its class and offset in 6 bits each");

inline constexpr std::uint64_t count_mask = (std::uint64_t{1} << 30) - 1;
inline constexpr std::uint64_t queued = std::uint64_t{1} << 30;
inline constexpr std::uint64_t in_slot = std::uint64_t{1} << 31;
inline constexpr std::uint64_t flags_and_count = (std::uint64_t{1} << 32) - 1;
inline constexpr std::uint64_t one_ticket = std::uint64_t{1} << 32;

// What a claim of n <= 64 positions got: the first position, and the bits
// (relative to it, lowest = first) of the objects it owns now.
struct claim {
  std::uint32_t first;
  bool exhausted;     // the pass reached K: the block must be replaced
  std::uint64_t got;  // bit i: object first + i
};

class blocks {
 public:
  GPUALLOC_HD blocks(const layout& L, std::byte* arena) : L_(L), arena_(arena) {}

  GPUALLOC_HD std::byte* data() const { return arena_ + L_.data_offset; }
  GPUALLOC_HD std::byte* object(std::uint32_t seg, std::uint32_t c, std::uint32_t i) const {
    return data() + (std::uint64_t{seg} << L_.segment_log2) + L_.object_offset(c, i);
  }
  GPUALLOC_HD std::uint32_t kind(std::uint32_t seg) const {
    return detail::device_atomic<std::uint32_t>(record(seg).kind).load(detail::relaxed);
  }
  // The kind of a segment that holds an object the caller owns (free): a
  // plain load, which L1 may serve. No one writes the kind while the object
  // is live (B2: a release waits for it), and the caller's claim on the
  // object is ordered after the format that wrote it. (With this load
  // relaxed, which goes to L2, and the class's shift loaded rather than
  // computed, 16 B frees took 3.71x `atomic`'s free kernel; now 3.58x;
  // H200, 16 GiB, 2^20 frees.)
  GPUALLOC_HD std::uint32_t kind_of_live(std::uint32_t seg) const { return record(seg).kind; }

  // Claims the objects at positions [at, at + n) of segment seg's running
  // pass of K objects (its class's, read by the caller before its claim's
  // acquire: sm_slab.h claim_objects), which an add on its slot's current
  // word handed this thread (sm_slab.h P1): in a fresh pass all of them
  // (B1), else those whose bits one fetch-and per bitmap word (one or two)
  // finds free among the first 64; settles the positions it did not get.
  GPUALLOC_HD claim take(std::uint32_t seg, std::uint32_t K, std::uint64_t at, std::uint32_t n, bool fresh) const {
    if (at >= K) return {K, true, 0};
    const auto first = static_cast<std::uint32_t>(at);
    const std::uint32_t len = n < K - first ? n : K - first;
    if (fresh) return {first, n >= K - first, detail::low_bits(len)};
    const std::uint32_t tried = len < 64 ? len : 64;  // a wide claim (sm_slab.h P5) skips the rest of its positions
    std::uint64_t* words = bitmap(seg);
    const std::uint32_t shift = first % 64;
    const std::uint64_t mask0 = detail::low_bits(tried) << shift;
    std::uint64_t got = take_bits(words[first / 64], mask0) >> shift;
    if (shift + tried > 64)
      got |= take_bits(words[first / 64 + 1], detail::low_bits(shift + tried - 64)) << (64 - shift);
    const std::uint32_t missed = len - detail::popcount(got);
    if (missed != 0) settle_missed(seg, missed);
    return {first, n >= K - first, got};
  }

  // Whether every object of the block of class c that the current word
  // `cur` names, in the pass the word shows, is free: its count is only the
  // positions nobody was handed yet. A hint (claims race with it).
  GPUALLOC_HD bool idle(std::uint64_t cur, std::uint32_t c) const {
    const std::uint32_t K = L_.objects(c, slot_word::wide(cur));
    const std::uint64_t taken = slot_word::taken(cur);
    return (holds(slot_word::segment(cur)).load(detail::relaxed) & count_mask) == (taken < K ? K - taken : 0);
  }

  // A slot lets go of `block` (a slot word's block half), current in a pass
  // of class c that handed out `taken` positions (the final position of the
  // word it replaced: sm_slab.h P1). Positions nobody was handed are settled
  // here, in a fresh pass with their bits set (B1) unless no object is live:
  // then the retirement releases the block (B2) and its next format writes
  // the bitmap anyway. (Always setting them made P6's sweep, one thread
  // walking every slot, write a word per 64 objects of every idle block, and
  // a 4 GiB heap cleared of mixed sizes then served 1 MiB requests up to 41 %
  // of it; then 97-98 %; H200.) The slot still holds the block while it
  // settles, so no one releases it meanwhile.
  GPUALLOC_HD void end_pass(std::uint32_t block, std::uint32_t c, std::uint64_t taken) const {
    const std::uint32_t seg = slot_word::segment(block), K = L_.objects(c, slot_word::wide(block));
    if (taken < K) {
      const auto rest = static_cast<std::uint32_t>(K - taken);
      const std::uint64_t after = holds(seg).fetch_sub(rest, detail::acq_rel) - rest;
      if (slot_word::fresh(block) && (after & count_mask) != 0)
        free_positions(seg, static_cast<std::uint32_t>(taken), K);
    }
    retire(seg);
  }

  // Objects whose bits lanes of one group set again in word w of seg's
  // bitmap (`bits`, `lanes` objects): B1, then the count (B2, Q2).
  GPUALLOC_HD void give_back(std::uint32_t seg, std::uint32_t w, std::uint64_t bits, std::uint32_t lanes) const {
    // Both addresses first: after the fence (and after an atomic) the
    // compiler would load the layout's offsets again, one more trip to
    // memory before each atomic. (ncu: those two waits took as many samples
    // as the fence, and with them one fence was no faster than two.)
    const detail::device_atomic<std::uint64_t> word(bitmap(seg)[w]);
    const auto count = holds(seg);
    detail::release_fence_on_device();  // one fence for both (free_bits, free_decrement)
    word.fetch_or(bits, free_bits);
    const std::uint64_t after = count.fetch_sub(lanes, free_decrement) - lanes;
    if (worth_a_look(after)) dropped(seg, after);
  }

  // Where this SM's next search for a span of 2^k segments (k > 0) starts:
  // where its last one was found (a hint per SM modulo hint_sms and span
  // size, in the arena; for a whole word, the word after it, which that
  // claim emptied) while that lies in the SM's own stretch of the heap
  // (layout.h stretch), else the stretch's start (below: or its middle).
  // (From the emptied word, every whole-word search read it and its parent
  // before the next word: 2^20 requests on a fresh 16 GiB heap, H100, x
  // `atomic`, medians of 7 over three rounds: 8 KiB 1.97x -> 1.94x, 16 B -
  // 8 KiB 2.23x -> 2.09x, warm 8 KiB 2.25x -> 2.15x.)
  // So SMs do not meet in one word and keep taking each other's runs: with
  // every SM starting in the lowest 64 words, a refill of 8 KiB blocks
  // (16 GiB, 2^20 requests, H100) tried 37 claims on average and walked
  // 48 words (ncu), and refills were 57 % of the samples; with hints that
  // only moved on, the SMs drifted into each other's stretches round after
  // round (4 KiB requests on a warm 16 GiB heap: 0.44 ms a round at first,
  // 1.2 ms after six). Before the
  // hints, every search walked from the lowest words past those that blocks
  // of other sizes had left without a free aligned span (8 KiB after rounds
  // of 16 B .. 4 KiB: 5x the fresh heap's time). Single segments fit any
  // free bit: theirs start in the SM's one of the lowest 64 words, so runs,
  // taken from the top, stay whole while the heap has room. Spans of a
  // whole word (2^max_span_log2 segments) start in the middle of the
  // stretch: on a fresh heap an SM's classes refill at once, and from the
  // stretch's start they walked word by word past the words the smaller
  // spans were cutting (the 8 KiB class's claims in 2^20 requests of
  // 16 B - 8 KiB took 34,000 cycles each instead of 16,000 with 512-object
  // blocks; instrumented, H100; layout.h slots). On a heap with room, the
  // stretches start after the single segments' words (layout.h
  // spans_from): the slots of the classes of one segment keep a current
  // and a next block per SM there, and the SMs whose stretches lay in
  // those words (0-4 of 132 on 16 GiB) found no aligned span in them, so
  // every claim landed past the stretch, whose hint then sent the next
  // search back to its start. In one process, warm 4 KiB requests after
  // rounds of 16 B .. 1 KiB took 0.171 ms, 0.122 without them (ncu: the
  // searches skipped 674 words, against 1), 8 KiB 0.177 and 0.129; with
  // the stretches moved, 0.80x and 0.81x the time of before, warm 16 B -
  // 8 KiB 0.81x, the other points within 2.5 %; on a fresh heap within
  // 2 %, 16 B - 8 KiB 0.91x (2^20 requests, 16 GiB, H100, medians of 7,
  // one round in each order).
  GPUALLOC_HD std::uint32_t search_start(std::uint32_t k) const {
    const std::uint32_t sm = detail::sm_id() % layout::hint_sms;
    if (k == 0) return sm % layout::single_words * 64;
    const std::uint64_t stretch =
        L_.spans_from + std::uint64_t{sm} * L_.stretch % (L_.segments - L_.spans_from) / 64 * 64;
    const std::uint32_t h = hint(k).load(detail::relaxed);
    const std::uint64_t first = stretch + (k == max_span_log2 ? L_.stretch / 2 / 64 * 64 : 0);
    return h >= stretch && h < stretch + L_.stretch ? h : static_cast<std::uint32_t>(first);
  }
  // This SM's hint for spans of 2^k segments, k in 1 .. max_span_log2.
  GPUALLOC_HD detail::device_atomic<std::uint32_t> hint(std::uint32_t k) const {
    return detail::device_atomic<std::uint32_t>(reinterpret_cast<std::uint32_t*>(
        arena_ + L_.hints_offset)[(detail::sm_id() % layout::hint_sms) * max_span_log2 + k - 1]);
  }

  GPUALLOC_HD shared_state& shared() const { return *reinterpret_cast<shared_state*>(arena_ + L_.shared_offset); }

  // A block for a slot of class c: a queued one (Q3) or a fresh span
  // (its head), held by the slot, its pass started (B4), as a slot word's
  // block half: segment, width (slot_word::width_for), wide and whether it
  // is fresh (B1); 0 when the class has none and the tree no free span. A
  // fresh span is wide (layout.h) only when `hot` (a prefetch asks) and
  // wide_for allows, and only if a search of wide_search_words leaf words
  // finds one; else it is the class's own span.
  // Spans are aligned runs searched from search_start; SMs that meet in a
  // word take different runs of it, and so do the classes of one SM (the
  // salt is SM id plus class). On a fresh heap an SM's classes refill at
  // once from the same hint: with the SM id alone they chose the same run
  // and all but one searched again (2^20 requests of 16 - 64 B and of
  // 16 - 256 B on a fresh 16 GiB heap: 0.0855 -> 0.0802 ms and 0.101 ->
  // 0.093 ms; the other points, warm too, within the rounds' spread;
  // H100, medians of 7 over three rounds). Out of line: refill and
  // prefetch share one copy (registers, sm_slab.h).
  __attribute__((noinline)) GPUALLOC_HD std::uint32_t get(std::uint32_t c, bool hot = false) const {
    // Where a search for the class's own span starts, loaded before the
    // queue's count: on a fresh heap the queue is empty, and the two trips
    // overlap instead of following each other. (A refill that dequeues a
    // block loads it for nothing; warm 4 and 8 KiB gained all the same:
    // without this and the relaxed add below, 1.04x the time; H100.)
    const std::uint32_t own_start = search_start(L_.cls[c].span_log2);
    std::uint32_t wide = 0, seg = dequeue(c, wide);
    const bool fresh = seg == no_segment;
    if (fresh) {
      // One load of the classes in use serves both; on a prefetch the
      // tree words that wide_for reads are loaded before its first use,
      // so their trips overlap.
      const std::uint64_t seen_classes = L_.wide_classes != 0 ? classes_seen().load(detail::relaxed) : 0;
      // A wide span if a short search finds one, else the class's own.
      std::uint32_t k = L_.cls[c].span_log2 + (hot ? wide_for(c, seen_classes) : 0);
      if (L_.wide_classes != 0) note_in_use(c, seen_classes);
      for (bool own = k == L_.cls[c].span_log2;; own = true, k = L_.cls[c].span_log2) {
        seg = tree().claim_aligned_from(own ? own_start : search_start(k), k, detail::sm_id() + c,
                                        own ? ~0u : wide_search_words);
        if (seg != detail::bit_tree::none || own) break;
      }
      if (seg == detail::bit_tree::none) return 0;
      if (k > 0) hint(k).store(k == max_span_log2 ? seg + 64 : seg, detail::relaxed);  // search_start
      wide = k - L_.cls[c].span_log2;
      format(seg, c, wide);
    }
    // The pass starts: K positions to settle (B4); the count before is the
    // live objects (and positions of the last pass a straggler has yet to
    // settle). A fresh block gets its ticket and in_slot in the same add
    // (format). (An add in format instead, and none here for a fresh block,
    // took the churn kernel from 124 to 128 registers and its rounds from
    // 109 to 178 ms: 16 B at 95 % of 2 GiB, H200.)
    const std::uint32_t K = L_.objects(c, wide);
    std::uint32_t width = 0;  // a fresh block's, all its objects free
    if (fresh)  // relaxed, its result unused: memory ordering at the top
      holds(seg).fetch_add(one_ticket + in_slot + K, detail::relaxed);
    else
      width = slot_word::width_for(static_cast<std::uint32_t>(holds(seg).fetch_add(K, detail::acq_rel) & count_mask), K);
    return slot_word::block(seg, width, fresh, wide);
  }

  // Wide blocks (layout.h): how far class c's next fresh block widens:
  // the most that keeps the blocks the slots of every class in use
  // (classes_seen) may hold at that width within half of the free
  // segments, counting each class's slots as c's (the budgets give the
  // classes alike shares), and none while more than half of the heap is in
  // use. The free segments are estimated from two leaf words of the tree at
  // random (bit_tree.h estimate_size: no count to keep; a count kept in
  // release raised the registers of examples/divisors' allocating kernel
  // from 128 to 132, past two blocks of 256 threads per SM). Counting c
  // alone let every class of a fill of 16 B - 4 KiB on 256 MiB widen, and
  // the blocks they did not fill by its end left it dry at 53.6 % (main:
  // 60 %; H100); so did counting c alone with the half-heap rule (55.9 %).
  // `seen_classes`: classes_seen as get read it, its trip overlapping the
  // tree words': a refill's trips to memory keep its slot's requests
  // waiting in lock_for_refill. (With a load here and one in note_in_use,
  // each a trip of its own, 16 B - 4 KiB x 131072 on a fresh 1 GiB heap
  // ran 6.6 % more instructions than before wide blocks, most in that wait,
  // ncu; with one load, 0.97x the time, 64 MiB 0.95x; H100, two rounds.)
  GPUALLOC_HD std::uint32_t wide_for(std::uint32_t c, std::uint64_t seen_classes) const {
    const class_info& ci = L_.cls[c];
    if (ci.wide_most == 0) return 0;
    const detail::bit_tree T = tree();
    const auto w = static_cast<std::uint32_t>(detail::walk_random::seeded().below(T.leaf_words()));
    const std::uint64_t room = T.estimate_size(w, (w + T.leaf_words() / 2) % T.leaf_words());
    if (2 * room < L_.segments) return 0;
    const std::uint64_t in_use = detail::popcount(seen_classes | std::uint64_t{1} << c);
    std::uint32_t wide = ci.wide_most;
    while (wide > 0 && (in_use * ci.slot_blocks << (ci.span_log2 + wide + 1)) > room) --wide;
    return wide;
  }
  // Marks class c in use (wide_for) on its first fresh spans since init:
  // only while `seen_classes` (get's load) lacks it, so that later spans do
  // not write the word; the result unused, nothing waits for the write.
  // Relaxed: a hint, as the room estimate is. Nothing clears it before the
  // heap's next init, so a program that has used every class widens no
  // more (conservative: no more than the budgets' spans are held).
  GPUALLOC_HD void note_in_use(std::uint32_t c, std::uint64_t seen_classes) const {
    const std::uint64_t bit = std::uint64_t{1} << c;
    if ((seen_classes & bit) == 0) classes_seen().fetch_or(bit, detail::relaxed);
  }
  GPUALLOC_HD detail::device_atomic<std::uint64_t> classes_seen() const {
    return detail::device_atomic<std::uint64_t>(shared().classes_seen);
  }
  // Leaf words a search for a wide span reads before it settles for the
  // class's own span (a heap with room may still have no aligned run).
  static constexpr std::uint32_t wide_search_words = 4;

  // Whether c's queue holds entries (some may be stale: dequeue drops them).
  GPUALLOC_HD bool any_queued(std::uint32_t c) const {
    return detail::device_atomic<std::int64_t>(entries(c).value).load(detail::relaxed) > 0;
  }

  // Whether get(c) looks bound to find nothing: c's queue and the tree are
  // empty. A hint (frees race with it), read without a write (sm_slab.h P2).
  GPUALLOC_HD bool looks_exhausted(std::uint32_t c) const {
    return !any_queued(c) && tree().looks_empty();
  }

  // Q3: retired blocks of class c with a free object, queued; false when a
  // cycle over the heap's windows found none (or the queue has no room).
  // One that found some has taken one window more than it looked at (the
  // loop's test after the next fetch-add; testing before it took the
  // allocation kernels from 128 to 130 registers), which waits for the next cycle.
  __attribute__((noinline)) GPUALLOC_HD bool scavenge(std::uint32_t c) const {
    detail::device_atomic<std::uint32_t> windows(shared().scavenged);
    const std::uint32_t cycle = (L_.segments + scavenge_window - 1) / scavenge_window;
    const std::uint32_t span = 1u << L_.cls[c].span_log2;  // heads are aligned to it (wide ones to more)
    const std::uint32_t first = windows.fetch_add(1, detail::relaxed);
    bool any = false;
    for (std::uint32_t w = first; !any; w = windows.fetch_add(1, detail::relaxed)) {
      const std::uint32_t base = w % cycle * scavenge_window;
      const std::uint32_t end = base + scavenge_window < L_.segments ? base + scavenge_window : L_.segments;
      for (std::uint32_t seg = base; seg < end; seg += span) {
        if (kind(seg) != c) continue;
        std::uint64_t seen = holds(seg).load(detail::acquire);  // at or after its format's release
        if (kind(seg) != c) continue;  // so this is the kind of seen's life, or of a later one
        const std::uint64_t count = seen & count_mask, K = L_.objects(c, wide_of(seg));  // as the kind
        if ((seen & (in_slot | queued)) != 0 || count == 0 || count >= K || !room(c).try_take(1)) continue;
        if (holds(seg).compare_exchange_strong(seen, seen + one_ticket + queued, detail::acq_rel, detail::relaxed)) {
          enqueue(c, seg);
          any = true;
        } else {
          room(c).add(1);  // a free or a queuer changed it meanwhile: theirs
        }
      }
      if (w - first + 1 >= cycle) break;
    }
    return any;
  }
  static constexpr std::uint32_t scavenge_window = 64;  // segments: a multiple of the largest span
  static_assert(scavenge_window % (1u << max_span_log2) == 0);

  // Objects a claim at `first` got and nobody wants (bits relative to first): back.
  __attribute__((noinline)) GPUALLOC_HD void give_back_claimed(std::uint32_t seg, std::uint32_t first,
                                                               std::uint64_t bits) const {
    const std::uint32_t w = first / 64, shift = first % 64;
    if (const std::uint64_t low = bits << shift; low != 0) give_back(seg, w, low, detail::popcount(low));
    if (const std::uint64_t high = shift == 0 ? 0 : bits >> (64 - shift); high != 0)
      give_back(seg, w + 1, high, detail::popcount(high));
  }

  // A slot lets go of seg, its pass ended (end_pass).
  GPUALLOC_HD void retire(std::uint32_t seg) const {
    if (const std::uint64_t after = holds(seg).fetch_sub(in_slot, detail::acq_rel) - in_slot; worth_a_look(after))
      dropped(seg, after);
  }

  // The highest run of `count` free segments, handed out whole; its first
  // segment or no_segment.
  GPUALLOC_HD std::uint32_t claim_run(std::uint32_t count) const {
    const std::uint32_t first = tree().claim_last_run(count);
    if (first == detail::bit_tree::none) return no_segment;
    detail::device_atomic<std::uint32_t>(record(first).kind).store(kind_run | count, detail::relaxed);
    return first;
  }
  GPUALLOC_HD void return_run(std::uint32_t first) const {
    const std::uint32_t count = kind(first) & ~kind_run;
    detail::device_atomic<std::uint32_t>(record(first).kind).store(kind_free, detail::relaxed);
    tree().insert_run(first, count);
  }

  // Init, thread t of `threads`: every segment free and in the tree, every queue empty.
  GPUALLOC_HD void init(std::uint64_t t, std::uint64_t threads) const {
    for (std::uint64_t seg = t; seg < L_.segments; seg += threads) {
      segment_record& r = record(static_cast<std::uint32_t>(seg));
      r.holds = 0;
      r.kind = kind_free;
    }
    for (std::uint64_t i = t; i < L_.tree.words; i += threads)
      tree_words()[i] = L_.tree.initial_word(static_cast<std::uint32_t>(i), true);
    for (std::uint64_t c = t; c < L_.classes; c += threads) {
      detail::queue_ends& e = ends(static_cast<std::uint32_t>(c));
      e.front = 0;
      e.back = 0;
      entries(static_cast<std::uint32_t>(c)).value = 0;
      room(static_cast<std::uint32_t>(c)).value = static_cast<std::int64_t>(L_.queue_mask + 1);
    }
    auto* hints = reinterpret_cast<std::uint32_t*>(arena_ + L_.hints_offset);
    for (std::uint64_t i = t; i < layout::hint_count; i += threads) hints[i] = no_segment;  // search_start: the stretch
    const std::uint64_t cells = L_.classes * (L_.queue_mask + 1);
    for (std::uint64_t i = t; i < cells; i += threads) ring_entries()[i] = detail::index_slot<std::uint32_t>::empty;
  }

 private:
  GPUALLOC_HD segment_record& record(std::uint32_t seg) const {
    return reinterpret_cast<segment_record*>(arena_ + L_.records_offset)[seg];
  }
  GPUALLOC_HD detail::device_atomic<std::uint64_t> holds(std::uint32_t seg) const {
    return detail::device_atomic<std::uint64_t>(record(seg).holds);
  }
  // A head's widening (wide blocks): written by format, for the block's life.
  GPUALLOC_HD std::uint32_t wide_of(std::uint32_t seg) const {
    return detail::device_atomic<std::uint32_t>(record(seg).wide).load(detail::relaxed);
  }
  GPUALLOC_HD std::uint64_t* bitmap(std::uint32_t seg) const {
    return reinterpret_cast<std::uint64_t*>(arena_ + L_.bitmaps_offset) + (std::uint64_t{seg} << L_.bitmap_words_log2);
  }
  GPUALLOC_HD std::uint64_t* tree_words() const { return reinterpret_cast<std::uint64_t*>(arena_ + L_.tree_offset); }
  GPUALLOC_HD detail::bit_tree tree() const { return detail::bit_tree(tree_words(), L_.tree); }
  GPUALLOC_HD detail::queue_ends& ends(std::uint32_t c) const {
    return *reinterpret_cast<detail::queue_ends*>(arena_ + L_.ends_offset + c * layout::queue_bytes());
  }
  GPUALLOC_HD detail::fill_count& entries(std::uint32_t c) const {  // in the queue (index_queue.h)
    return reinterpret_cast<detail::fill_count*>(arena_ + L_.ends_offset + c * layout::queue_bytes() +
                                                 sizeof(detail::queue_ends))[0];
  }
  GPUALLOC_HD detail::fill_count& room(std::uint32_t c) const {  // ring entries neither reserved nor dequeued
    return reinterpret_cast<detail::fill_count*>(arena_ + L_.ends_offset + c * layout::queue_bytes() +
                                                 sizeof(detail::queue_ends))[1];
  }
  GPUALLOC_HD std::uint32_t* ring_entries() const { return reinterpret_cast<std::uint32_t*>(arena_ + L_.rings_offset); }
  GPUALLOC_HD detail::index_ring<std::uint32_t> ring(std::uint32_t c) const {
    return {ring_entries() + c * (L_.queue_mask + 1), L_.queue_mask};
  }

  GPUALLOC_HD static std::uint64_t take_bits(std::uint64_t& word, std::uint64_t mask) {
    return detail::device_atomic<std::uint64_t>(word).fetch_and(~mask, detail::acquire) & mask;
  }

  // Positions of the running pass a claimer took but found no free bit at.
  __attribute__((noinline)) GPUALLOC_HD void settle_missed(std::uint32_t seg, std::uint32_t missed) const {
    const std::uint64_t after = holds(seg).fetch_sub(missed, detail::acq_rel) - missed;
    if (worth_a_look(after)) dropped(seg, after);
  }

  // B1: positions [first, end) of a first pass that nobody was handed become free in the bitmap.
  __attribute__((noinline)) GPUALLOC_HD void free_positions(std::uint32_t seg, std::uint32_t first,
                                                            std::uint32_t end) const {
    for (std::uint32_t p = first; p < end;) {
      const std::uint32_t word_end = (p / 64 + 1) * 64, stop = word_end < end ? word_end : end;
      detail::device_atomic<std::uint64_t>(bitmap(seg)[p / 64]).fetch_or(detail::low_bits(stop - p) << (p % 64),
                                                                         detail::relaxed);
      p = stop;
    }
  }

  // A free's bits and its decrement of `holds` release: on the device
  // through the one fence before both (give_back), on the host each itself.
  // Only on the host does the decrement also acquire: on the device the one
  // free in many that acts on the count fences (dropped: acquire fence
  // before B2; Q2's compare-and-swap is acq_rel), so the others skip an
  // acquire's L1 invalidation. (With each release operation a fence of its
  // own, the second fence waited for the fetch-or to come back: 2^20 frees
  // of 16 B, ncu, H100: the two fences and the decrement's result 670 of
  // 1,873 samples, now 506 of 1,854. 2^20 frees on a fresh 16 GiB heap,
  // medians of 7 over four rounds in two calls: 0.94-0.98 of the time
  // before at one size 64 B - 8 KiB and at mixed sizes, 16 B 1.01; small
  // launches and small heaps 0.92-0.99; allocation unchanged.)
  static constexpr auto free_bits = detail::device_or_host(detail::relaxed, detail::release);
  static constexpr auto free_decrement = detail::device_or_host(detail::relaxed, detail::acq_rel);

  // Whether holds at `after` may ask something of dropped(): count 0 in a
  // block no slot holds (B2, Q2).
  GPUALLOC_HD static bool worth_a_look(std::uint64_t after) {
    return (after & (count_mask | in_slot)) == 0;
  }

  // Segment seg's holds fell to `after`, count 0 and no slot holding it,
  // by this thread's own change: only that change makes it the releaser
  // (B2: no flag, B4), or the one that ends a queued block's life (Q2),
  // unless a dequeue takes the block first (a value read again after a
  // failed compare-and-swap is not this thread's).
  __attribute__((noinline)) GPUALLOC_HD void dropped(std::uint32_t seg, std::uint64_t after) const {
    if ((after & flags_and_count) == 0) {
      detail::acquire_fence_on_device();  // after every decrement before this one (free_decrement)
      return release(seg);                // B2
    }
    for (detail::backoff wait; (after & flags_and_count) == queued; wait.pause())  // Q2
      if (holds(seg).compare_exchange_strong(after, after & ~flags_and_count, detail::acq_rel, detail::acquire))
        return release(seg);
  }

  // B2: the block's span back to the tree, its kinds free first (the
  // tree's acq_rel insert orders them before the next claimer's format).
  __attribute__((noinline)) GPUALLOC_HD void release(std::uint32_t seg) const {
    const std::uint32_t span = 1u << (L_.cls[kind(seg)].span_log2 + wide_of(seg));
    segment_record* const head = &record(seg);  // not reloaded past each store (they may alias L_ for the compiler)
    set_tail_kinds(head, span, kind_free, 0);
    detail::device_atomic<std::uint32_t>(head->kind).store(kind_free, detail::relaxed);
    tree().insert_run(seg, span);
  }

  GPUALLOC_HD void enqueue(std::uint32_t c, std::uint32_t seg) const {
    detail::index_slot<std::uint32_t>::put(ring(c).at(ends(c).reserve_back(1)), seg);
    entries(c).add(1);
  }

  // A queued block of class c, now held by a slot (Q1), or no_segment;
  // `wide` its widening. Kind and width are read with the ticket they
  // belong to, before the claim that keeps it (so their loads overlap: a
  // load of the width after the claim was one more trip to memory on each
  // refill's path).
  GPUALLOC_HD std::uint32_t dequeue(std::uint32_t c, std::uint32_t& wide) const {
    while (entries(c).try_take(1)) {
      const std::uint32_t seg = detail::index_slot<std::uint32_t>::take(ring(c).at(ends(c).reserve_front(1)));
      room(c).add(1);
      const std::uint64_t entered = holds(seg).load(detail::acquire);
      wide = wide_of(seg);
      if (kind(seg) != c) continue;
      for (std::uint64_t seen = entered; (seen & (in_slot | queued)) == queued && (seen ^ entered) < one_ticket;)
        if (holds(seg).compare_exchange_strong(seen, (seen & ~queued) + in_slot, detail::acq_rel, detail::acquire))
          return seg;
    }
    return no_segment;
  }

  // Tail d (1 .. span-1) of the span at `head` gets kind base + d * step
  // (format: tail_kind(c, 0), step 1; release: kind_free, step 0). span is
  // a power of two: tails 1 .. 3 (those it has), then four a step. (A
  // store a step, the 63 of an 8 KiB block were one thread's loop of
  // dependent steps while its SM's requests waited for the block; four a
  // step: 2^20 requests of 8 KiB on a fresh 16 GiB heap 2.03x -> 1.97x
  // `atomic`, of 16 B - 8 KiB 2.36x -> 2.23x; H100, medians of 7 over
  // three rounds; clang 22 ignored `#pragma unroll` here.)
  GPUALLOC_HD static void set_tail_kinds(segment_record* head, std::uint32_t span, std::uint32_t base,
                                         std::uint32_t step) {
    const auto set = [&](std::uint32_t d) {
      detail::device_atomic<std::uint32_t>(head[d].kind).store(base + d * step, detail::relaxed);
    };
    std::uint32_t d = 1;
    for (; d < span && d < 4; ++d) set(d);
    for (; d < span; d += 4) set(d), set(d + 1), set(d + 2), set(d + 3);
  }

  // The first n words of a head's bitmap cleared (format): two words a
  // store, four stores a step (as set_tail_kinds), n rounded up to even,
  // which the head's bitmap holds (a power of two words, at least two:
  // layout.h). Plain stores: no one touches the bitmap of a span being
  // formatted (B2: its last life is over), and the install's release
  // publishes them. Written out in PTX, since clang makes a loop of plain
  // stores a memset, which it lowers for the GPU to a store a byte. (A
  // relaxed atomic store a word was 44 % of the instructions of a kernel
  // whose one request refilled a 16 B block: 128 words on 16 GiB; ncu,
  // H100. With this and bit_tree.h's aligned_runs, that kernel ran 1,377
  // instructions instead of 1,900, but in 21.5 us under ncu instead of
  // 22.0: its trips to memory, one after another, set its time, not its
  // instructions.)
  GPUALLOC_HD static void clear_bitmap(std::uint64_t* words, std::uint32_t n) {
    const auto clear_two = [words](std::uint32_t i) {
#ifdef __CUDA_ARCH__
      asm volatile("st.v2.u64 [%0], {%1, %1};" ::"l"(words + i), "l"(std::uint64_t{0}) : "memory");
#else
      words[i] = words[i + 1] = 0;
#endif
    };
    static_assert(min_segment_log2 - min_object_log2 - 6 >= 1, "every head's bitmap holds two words or more");
    std::uint32_t i = 0;
    for (; i + 8 <= n; i += 8) clear_two(i), clear_two(i + 2), clear_two(i + 4), clear_two(i + 6);
    for (; i < n; i += 2) clear_two(i);
  }

  // A fresh span (from the tree, seg its head) becomes a block of class c:
  // its kinds, and its bitmap clear for its first pass (B1). Its holds come
  // after, in get: since its release (B2) they have been its ticket and
  // nothing else (no flag, count 0: no object, position or queue entry can
  // change them), so the add that starts its pass (relaxed: memory
  // ordering, at the top) also gives it a new ticket and in_slot. Tails keep
  // their holds as they were at their last release (count 0, no flag): a
  // stale queue entry that reaches one touches nothing (Q1).
  GPUALLOC_HD void format(std::uint32_t seg, std::uint32_t c, std::uint32_t wide) const {
    const std::uint32_t K = L_.objects(c, wide), span = 1u << (L_.cls[c].span_log2 + wide);
    segment_record* const head = &record(seg);  // as in release: the loops reload nothing
    std::uint64_t* const words = bitmap(seg);
    set_tail_kinds(head, span, tail_kind(c, 0), 1);
    detail::device_atomic<std::uint32_t>(head->wide).store(wide, detail::relaxed);
    clear_bitmap(words, (K + 63) / 64);
    detail::device_atomic<std::uint32_t>(head->kind).store(c, detail::relaxed);
  }

  const layout& L_;
  std::byte* arena_;
};

}  // namespace gpualloc::sm_slab_parts
