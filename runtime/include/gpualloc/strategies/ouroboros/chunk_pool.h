// The chunks not in use: a set in the free-chunk tree plus a count of what
// is not promised to anyone.
//
//  available  in shares of a chunk (2^share_shift per chunk, one share the
//             room of a 4-byte queue slot): free chunks' shares minus the
//             shares reserved for queue storage and not yet spent on queue
//             chunks (virtualised queues reserve what their queues may need,
//             so an enqueue never waits for memory the program holds:
//             storage.h)
//  tree       the free chunks themselves
//
// A chunk for pages (one base chunk, or a run of three), or a run for large
// blocks, is first reserved out of `available` (a failed reservation is the
// fast "out of memory"), then taken out of the tree: single chunks at or
// near the low end, runs from the high end, so that small and large
// allocations fill the heap from opposite sides. A queue chunk is taken out of the tree only:
// its reservation is its queue's. Giving back is the reverse. Counting in
// shares lets a queue reserve its slots with the same fetch-add as the
// chunk they are for; counted in whole chunks, each queue needed a counter
// of its own slots and a compare-and-swap to tell when a reservation
// crossed a chunk, and ouroboros-c-va's refills retried it about 600 times
// each (ncu: 84 % of the samples at 1 KiB).
//
// Invariant: available = shares of the free chunks - (shares reserved for
// queues - shares of queue chunks in use). A taker that reserved finds a
// chunk in the tree unless queue chunks outnumber their reservation for a
// moment (a slow dequeue holding a fully used queue chunk); it then gives up
// its reservation and fails like a failed reservation. A queue chunk taker
// waits instead.
//
// Memory ordering: the tree's operations are acq_rel (detail/bit_tree.h), so
// a chunk taken is ordered after the give that freed it, and with that after
// everything its previous owner did. `available` is relaxed: it only counts.
#pragma once

#include <cstdint>

#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/random.h"
#include "gpualloc/detail/sm.h"
#include "gpualloc/strategies/ouroboros/layout.h"

namespace gpualloc::strategies::ouro {

struct chunk_pool {
  static constexpr unsigned share_shift = 11;  // shares per chunk: 2048, one per 4-byte queue slot
  static_assert(chunk_bytes / 4 == std::uint64_t{1} << share_shift);

  GPUALLOC_HD static bool reserve_shares(heap h, std::uint64_t n) {
    return detail::try_take_counted(detail::device_atomic<std::int64_t>(h.pool().available),
                                    static_cast<std::int64_t>(n));
  }
  GPUALLOC_HD static void unreserve_shares(heap h, std::uint64_t n) {
    detail::device_atomic<std::int64_t>(h.pool().available).fetch_add(static_cast<std::int64_t>(n), detail::relaxed);
  }

  GPUALLOC_HD static bool reserve(heap h, std::uint64_t chunks) { return reserve_shares(h, chunks << share_shift); }
  GPUALLOC_HD static void unreserve(heap h, std::uint64_t chunks) { unreserve_shares(h, chunks << share_shift); }

  // A reserved single chunk, or no_chunk (then the reservation is given back).
  GPUALLOC_HD static std::uint32_t take_reserved(heap h) {
    const std::uint64_t x = take_low(h, true);
    if (x != detail::bit_tree::none) return static_cast<std::uint32_t>(x);
    unreserve(h, 1);
    return no_chunk;
  }

  // A reserved run of k chunks (its first), or no_chunk (then the reservation is given back).
  GPUALLOC_HD static std::uint32_t take_reserved_run(heap h, std::uint64_t k) {
    const std::uint64_t x = h.free_chunks().claim_last_run(k);
    if (x != detail::bit_tree::none) return static_cast<std::uint32_t>(x);
    unreserve(h, k);
    return no_chunk;
  }

  // A chunk for queue storage (reserved by its queue); waits while there is none.
  GPUALLOC_HD static std::uint32_t take_for_queue(heap h) {
    detail::backoff b;
    for (;;) {
      const std::uint64_t x = take_low(h, false);
      if (x != detail::bit_tree::none) return static_cast<std::uint32_t>(x);
      b.pause();
    }
  }

  // A chunk for pages of size c (span_of(c) base chunks, described as such),
  // with `slots` queue slots reserved for its pages (storage.h, Q4), or
  // no_chunk when the pool has none.
  template <class Storage, class Entry>
  GPUALLOC_HD static std::uint32_t take_for_pages(heap h, unsigned c, std::uint64_t slots) {
    const unsigned span = span_of(c);
    if (!Storage::template reserve_slots<Entry>(h, c, slots)) return no_chunk;
    if (reserve(h, span)) {
      const std::uint32_t x = span == 1 ? take_reserved(h) : take_reserved_run(h, span);
      if (x != no_chunk) {
        for (unsigned i = 0; i < span; ++i) h.store_desc(x + i, descriptor::make(descriptor::pages, c, i));
        return x;
      }
    }
    Storage::template release_slots<Entry>(h, c, slots);
    return no_chunk;
  }

  // Gives back k chunks from x on: free and available again, with `shares`
  // more (queue slots given back with them, storage.h) in the same add.
  GPUALLOC_HD static void give(heap h, std::uint32_t x, std::uint64_t k, std::uint64_t shares = 0) {
    for (std::uint64_t i = 0; i < k; ++i)
      h.store_desc(static_cast<std::uint32_t>(x + i), descriptor::make(descriptor::free, 0, 0));
    h.free_chunks().insert_run(x, k);
    unreserve_shares(h, (k << share_shift) + shares);
  }

  // Gives back a queue chunk: free again, still reserved for its queue.
  GPUALLOC_HD static void give_from_queue(heap h, std::uint32_t x) {
    h.store_desc(x, descriptor::make(descriptor::free, 0, 0));
    h.free_chunks().insert(x);
  }

 private:
  // A chunk out of the tree, or none: a random one of the chunks of a leaf
  // word at or near the low end. When thousands of refills (or of a free
  // burst's queue chunks) claim at once, claim_first sends all of them to
  // the same lowest chunk, one winner per round: P-VA's frees of 2^20 pages
  // waited 68 % of their samples for queue chunks so taken (ncu, H200),
  // 0.51 ms; with a random chunk of the lowest word, 0.17 ms. Even so, all
  // claimers on one word took turns on it: 2^20 requests for 4 KiB pages
  // (Ouroboros-C-S, H200) made 4.8 million fetch-ands there for 0.5 million
  // chunks, 23.7 ms. So the search for a chunk for pages starts at one of
  // the spread + 1 words from the lowest that has one, chosen by the SM
  // (8.2 ms): spread is at most the SM count and an eighth of the words in
  // use, so that it adds at most an eighth to the heap's address range (the
  // paper's fragmentation test) and none while little of the heap is in use.
  // (Spreading only while many claim at once needs a count of them: the
  // semaphores' expected bulks overstate it, as every waiter adds to them
  // for a moment, and a counter of its own is one more contended atomic.)
  // Queue chunks come from the lowest word.
  GPUALLOC_HD static std::uint64_t take_low(heap h, bool spread_out) {
    const detail::bit_tree tree = h.free_chunks();
    std::uint64_t spread = 0;
    if (spread_out) {
      const std::uint64_t free = static_cast<std::uint64_t>(
          detail::device_atomic<std::int64_t>(h.pool().available).load(detail::relaxed)) >> share_shift;
      const std::uint64_t used = h.L.chunks > free ? h.L.chunks - free : 0;
      const std::uint64_t eighth_in_words = used / (8 * 64), sms = detail::sm_count();
      spread = eighth_in_words < sms ? eighth_in_words : sms;
    }
    std::uint32_t start = 0;
    if (spread != 0) {
      const std::uint32_t low = tree.next(0);
      if (low == detail::bit_tree::none) return low;
      start = (low / 64 + static_cast<std::uint32_t>(detail::sm_id() % (spread + 1))) * 64;
    }
    return tree.claim_aligned_from(start, 0, detail::walk_random::seeded().next());
  }
};

}  // namespace gpualloc::strategies::ouro
