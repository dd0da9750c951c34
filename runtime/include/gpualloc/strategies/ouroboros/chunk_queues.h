// Chunk queues (Ouroboros' C variants; Winter et al., ICS 2020, section 4.2,
// Algorithms 4 and 5): the other answer to what a queue holds. Queue c holds
// the indices of chunks of size-c pages (layout.h: one base chunk, or three)
// that have free pages; each chunk
// keeps a count of its free pages and a bit-field of which they are
// (detail/bit_field.h). The bulk semaphore counts the free pages on the
// queue's chunks, a fill count the entries in the queue.
//
// malloc (a group of n lanes): the leader waits on the semaphore for n pages,
// then takes the front chunk (fill count, front position: Algorithm 1) and
// subtracts what it wants from the chunk's count. Chunk modes (Algorithm 5):
// pages left after the claim: the chunk goes back into the queue at once
// (RE_ENQUEUE); none left: it stays out (DEQUEUE), and the free that brings
// it a page again puts it back (FIRST_FREE in Algorithm 4). Then the leader
// clears the claimed pages' bits word by word (one fetch-and for up to 64
// pages) and hands each batch to the lanes by rank; it takes more chunks
// until the group has its n pages.
// Before it takes a chunk off the queue, and again each time it finds the
// queue empty while it waits for an entry, the leader tries the chunk its
// SM last put back there with pages left (one per SM and size, kept beside
// the chunks' state): it subtracts from that chunk's count in place, as the
// paper's walkers do on the chunks they pass, and the entry stays where it
// is. Without it the groups of a size took turns on the few chunks in its
// queue: with 2^20 lanes asking for 16 B-4 KiB (9 page sizes, groups of
// 3-4 lanes), ncu (H200) found the leaders spinning for a queue entry 3.9
// million times in a launch. Trying the hint only before the wait, C-S took
// 7.2 ms for that test; trying it during the wait too, 4.8 ms.
// free: every lane sets its page's bit; the leader of the lanes freeing on
// one chunk adds their number to its count and signals the semaphore.
// The free that makes a chunk wholly free gives it back to the pool
// (Algorithm 4, line 30), unless that would leave its page size with less
// than a chunk's worth of free pages (the paper's lower fill level).
//
// Why not the paper's protocol as it stands: its walkers read chunk indices
// in place from the front onward and all hammer the front chunk's count,
// and it removes a chunk's queue slot from anywhere (queue_pos) when the
// chunk is given back, so a walker that read the index earlier then
// allocates from a chunk that now serves another size or holds a queue.
// Here a chunk is taken out of the queue by one holder at a time (each
// group works on a chunk of its own), and a chunk given back leaves its
// entry in the queue, made stale by a tag:
//
// Per chunk, one state word: [63:32] count (free pages not yet claimed,
// signed), [31:8] tag (incremented each time the chunk is carved into
// pages), [7] queued, [6] live (carved into pages of this scheme), [3:0] size.
// A queue entry is tag << 32 | chunk.
//
// Invariants
//  C1 queued is set while the chunk has an entry in the queue or a holder
//     that took one, so a live chunk has at most one current entry. It is
//     set by whoever makes it so (carve, FIRST_FREE, a re-check after
//     DEQUEUE; a compare-and-swap that also checks the tag) and then
//     enqueues; cleared only by a holder, which then re-checks the count.
//  C2 Every change of count is one atomic add on the state word, and a
//     thread whose add leaves a live, unqueued chunk with count > 0 queues
//     it (C1). So a chunk whose pages the semaphore counts is, or soon will
//     be, where a holder finds it: the pages the semaphore granted exist.
//  C3 A holder claims pages only from an entry whose tag, size and live bit
//     match the state word returned by its subtraction. An entry of a chunk
//     given back since (stale) fails the test; the holder adds back what it
//     subtracted (C2 applies: the chunk may have a new life) and drops the
//     entry. Stale holders only ever add and subtract on the count, and
//     every other writer of the word (carve, give back) is a
//     compare-and-swap that keeps the count, so their transient
//     subtractions never corrupt a chunk's next life.
//  C4 A chunk is given back only by a compare-and-swap from (count = all
//     pages, live, its tag): no holder has claimed anything from it and the
//     semaphore was reduced by its pages first. The free that makes the
//     count whole waits for its group's bits first (group.sync()), so no
//     lane sets a bit in a chunk given back.
//  C5 Queue slots (storage.h, Q4): a live chunk reserves one slot for its
//     current entry; a chunk given back while queued leaves its slot to its
//     stale entry, whose holder releases it. So a queue never holds more
//     entries than it reserved slots (at most two per chunk).
//  C6 An SM's chunk is a hint, trusted for nothing: it owns no entry and
//     sets no bit. Its users are holders as in C3 (tag, size and live
//     checked against the subtraction's result; what they do not use is
//     added back as in C2). A user first reads the state word and drops a
//     hint whose chunk has no pages or another life, so mostly a hint
//     costs a read; when the chunk changes between the read and the
//     subtraction, for a moment others see its count low (a holder may
//     DEQUEUE it early: the add-back requeues it, C2; a free may miss
//     giving it back: C7).
//  C7 A transient subtraction (a stale holder's, a hint user's) can make
//     the free that completes a chunk's count miss giving it back (C4):
//     that chunk stays in its queue, wholly free, until its size is asked
//     for again. The add-back does not give it back in the free's place:
//     a stale holder's chunk is in a later life, whole most likely because
//     it was just carved; and measured for hint users alone (H200,
//     ouroboros-c-vl, 2^20 lanes), retiring on their add-back took the
//     mixed-size test from 8.7 to 13.9 ms and 16 B from 1.07 to 1.64 ms,
//     even out of line.
//
// Memory ordering: a page's bytes travel with its bit (release on set,
// acquire on claim); the leader's claim is followed by group.sync() before
// the lanes use their pages. State-word changes are acq_rel, except a
// claim's subtraction (acquire: it reads the carve or the frees before it)
// and a holder's give-back of what it did not use (relaxed: it still holds
// the chunk, C1). An entry's put (release) and take (acquire) order a
// chunk's carve before its holders. The SM hints are relaxed: nothing is
// trusted before the state word's read-modify-write has checked it (C6).
#pragma once

#include <cstdint>

#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/bit_field.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/strategies/ouroboros/chunk_pool.h"
#include "gpualloc/strategies/ouroboros/layout.h"

namespace gpualloc::strategies::ouro {

template <class Storage>
struct chunk_queues {
  using entry = std::uint64_t;  // tag << 32 | chunk

  static std::uint64_t max_entries(unsigned c, std::uint64_t chunks) { return 2 * (chunks / span_of(c)); }
  static constexpr unsigned bit_words = 1u << (page_index_bits - 6);  // 8 words: 512 pages
  // Per chunk: the state word, the bit-field.
  static constexpr std::uint64_t per_chunk_bytes = sizeof(std::uint64_t) * (1 + bit_words);
  // Besides: per SM (modulo sm_slots), the entry of the chunk it last put
  // back in each size's queue with pages left, one cache line per SM (C6;
  // 128 bytes more to align them).
  static constexpr std::uint64_t sm_slots = 256, entries_per_sm = 16;
  static_assert(page_classes <= entries_per_sm && entries_per_sm * sizeof(entry) == 128);
  static constexpr std::uint64_t fixed_bytes = 128 + sm_slots * entries_per_sm * sizeof(entry);

  GPUALLOC_HD static void init(heap h, std::uint64_t thread, std::uint64_t threads) {
    for (std::uint64_t x = thread; x < h.L.chunks; x += threads) state_word(h, x) = 0;
    for (std::uint64_t i = thread; i < sm_slots * entries_per_sm; i += threads) sm_chunks(h)[i] = no_entry;
  }

  // Lanes of `g` (same size c) each get a page, or NULL when the heap is out of memory.
  GPUALLOC_HD static void* malloc(heap h, unsigned c, const detail::lane_group& g) {
    std::uint64_t granted = 0;
    if (g.is_leader()) {
      queue_control& q = h.queue(c);
      const std::uint32_t n = g.size();
      granted = q.sem.try_wait(n) ? n : wait(h, c, n);
    }
    granted = g.broadcast(granted);
    holding hold{no_chunk, 0, 0};
    std::byte* mine = nullptr;
    for (std::uint64_t done = 0; done < granted;) {
      std::uint64_t where = 0, bits = 0;  // where: chunk << 3 | word
      if (g.is_leader()) bits = take_pages(h, c, granted - done, hold, where);
      where = g.broadcast(where);
      bits = g.broadcast(bits);
      const std::uint32_t got = detail::popcount(bits);
      if (g.rank() >= done && g.rank() < done + got) {
        const std::uint64_t index =
            (where & 7) * 64 + detail::nth_set_bit(bits, static_cast<std::uint32_t>(g.rank() - done));
        mine = h.chunk(static_cast<std::uint32_t>(where >> 3)) + ((index * span_of(c)) << shift_of(c));
      }
      done += got;
    }
    if (granted != 0) g.sync();  // the lanes use pages the leader acquired
    return mine;
  }

  // Lanes of `g` each free a page of size c, all on the chunk starting at base chunk x.
  GPUALLOC_HD static void free(heap h, unsigned c, std::uint32_t x, std::uint32_t page, const detail::lane_group& g) {
    bits_of(h, x).set(page);
    g.sync();  // C4: every lane's bit is set before the count says so
    if (!g.is_leader()) return;
    const std::uint64_t n = g.size();
    const std::uint64_t old = state(h, x).fetch_add(n * one_page, detail::acq_rel);
    if ((old & queued) != 0 && count(old) + static_cast<std::int64_t>(n) < pages_per_chunk(c))
      h.queue(c).sem.signal(n);
    else
      freed_rare(h, c, x, n, old);
  }

  // The lanes of a free are grouped by chunk (one count update each).
  GPUALLOC_HD static std::uint64_t free_key(unsigned, std::uint32_t x) { return x; }

  // Chunks go back to the pool as they become free: nothing left to reclaim.
  GPUALLOC_HD static bool reclaim(const heap&) { return false; }

 private:
  static constexpr std::uint64_t one_page = std::uint64_t{1} << 32;
  static constexpr std::uint64_t queued = 1u << 7, live = 1u << 6, size_mask = 15;
  static constexpr std::uint32_t tag_mask = (1u << 24) - 1;
  static constexpr entry no_entry = ~entry{0};

  struct holding {
    std::uint32_t x;     // the chunk the leader claimed pages on
    std::uint32_t left;  // pages claimed there whose bits are still to be found
    std::uint32_t word;  // where to look next
  };

  GPUALLOC_HD static std::uint64_t& state_word(heap h, std::uint64_t x) { return h.at<std::uint64_t>(h.L.content)[x]; }
  GPUALLOC_HD static detail::device_atomic<std::uint64_t> state(heap h, std::uint32_t x) {
    return detail::device_atomic<std::uint64_t>(state_word(h, x));
  }
  GPUALLOC_HD static detail::bit_field bits_of(heap h, std::uint32_t x) {
    return {h.at<std::uint64_t>(h.L.content + sizeof(std::uint64_t) * h.L.chunks) + std::uint64_t{x} * bit_words};
  }
  GPUALLOC_HD static entry* sm_chunks(heap h) {
    return h.at<entry>(align_up(h.L.content + per_chunk_bytes * h.L.chunks, 128));
  }
  GPUALLOC_HD static detail::device_atomic<entry> sm_chunk(heap h, unsigned c) {
    return detail::device_atomic<entry>(sm_chunks(h)[(detail::sm_id() % sm_slots) * entries_per_sm + c]);
  }
  GPUALLOC_HD static unsigned words_for(unsigned c) { return (pages_per_chunk(c) + 63) / 64; }

  GPUALLOC_HD static std::int64_t count(std::uint64_t v) { return static_cast<std::int32_t>(v >> 32); }
  GPUALLOC_HD static std::uint32_t tag(std::uint64_t v) { return static_cast<std::uint32_t>(v >> 8) & tag_mask; }
  GPUALLOC_HD static bool matches(std::uint64_t v, std::uint32_t t, unsigned c) {
    return (v & live) != 0 && tag(v) == t && (v & size_mask) == c;
  }
  // What a subtraction of `want` from a count of `have` got.
  GPUALLOC_HD static std::uint64_t claimable(std::int64_t have, std::uint64_t want) {
    return have <= 0 ? 0 : static_cast<std::uint64_t>(have) < want ? static_cast<std::uint64_t>(have) : want;
  }
  GPUALLOC_HD static entry make_entry(std::uint32_t t, std::uint32_t x) { return std::uint64_t{t} << 32 | x; }

  GPUALLOC_HD __attribute__((noinline)) static std::uint32_t wait(heap h, unsigned c, std::uint32_t n) {
    return h.queue(c).sem.wait(n, pages_per_chunk(c), [&](std::uint64_t k) { return refill(h, c, k); });
  }

  // Algorithm 4's allocChunk, k times: a chunk from the pool, all its pages
  // free, queued (C1), then its pages signalled.
  GPUALLOC_HD static std::uint64_t refill(heap h, unsigned c, std::uint64_t k) {
    const std::uint32_t pages = pages_per_chunk(c);
    for (std::uint64_t got = 0; got < k; ++got) {
      const std::uint32_t x = chunk_pool::take_for_pages<Storage, entry>(h, c, 1);
      if (x == no_chunk) return got;
      const detail::bit_field field = bits_of(h, x);
      for (unsigned w = 0; w < words_for(c); ++w)
        detail::device_atomic<std::uint64_t>(field.words[w]).store(detail::low_bits(pages), detail::relaxed);
      auto s = state(h, x);
      std::uint64_t v = s.load(detail::relaxed), to;
      do {
        const std::uint64_t counted =
            static_cast<std::uint32_t>(count(v) + pages);  // keeps transient subtractions (C3)
        to = counted << 32 | std::uint64_t{(tag(v) + 1) & tag_mask} << 8 | queued | live | c;
      } while (!s.compare_exchange_weak(v, to, detail::acq_rel, detail::relaxed));
      enqueue(h, c, make_entry(tag(to), x));
      h.queue(c).sem.signal_expected(pages);
    }
    return k;
  }

  GPUALLOC_HD static void enqueue(heap h, unsigned c, entry e) {
    queue_control& q = h.queue(c);
    q.fill.add(1);
    Storage::template put<entry>(h, c, q.ends.reserve_back(1), e);
  }

  // The leader's next batch: up to `want` pages' bits from one word of its chunk.
  GPUALLOC_HD static std::uint64_t take_pages(heap h, unsigned c, std::uint64_t want, holding& hold,
                                              std::uint64_t& where) {
    if (hold.left == 0) hold = claim_chunk(h, c, want);
    const detail::bit_field field = bits_of(h, hold.x);
    for (detail::backoff b;;) {
      const std::uint64_t m = field.claim(hold.word, hold.left < 64 ? hold.left : 64);
      if (m != 0) {
        hold.left -= detail::popcount(m);
        where = std::uint64_t{hold.x} << 3 | hold.word;
        return m;
      }
      if (++hold.word == words_for(c)) {
        hold.word = 0;
        b.pause();  // a freeing lane's bit is not visible yet
      }
    }
  }

  // Pages (at most `want`) from this SM's chunk without taking its entry
  // (C6), or none.
  GPUALLOC_HD static holding claim_in_place(heap h, unsigned c, std::uint64_t want) {
    auto hint = sm_chunk(h, c);
    entry e = hint.load(detail::relaxed);
    if (e == no_entry) return {no_chunk, 0, 0};
    const auto x = static_cast<std::uint32_t>(e);
    const auto t = static_cast<std::uint32_t>(e >> 32);
    if (const std::uint64_t seen = state(h, x).load(detail::relaxed); !matches(seen, t, c) || count(seen) <= 0) {
      hint.compare_exchange_strong(e, no_entry, detail::relaxed);  // a read, not a subtraction, tells it is spent
      return {no_chunk, 0, 0};
    }
    const std::uint64_t old = state(h, x).fetch_sub(want * one_page, detail::acquire);
    const std::int64_t have = matches(old, t, c) ? count(old) : 0;
    const std::uint64_t got = claimable(have, want);
    if (got < want) added(h, x, state(h, x).fetch_add((want - got) * one_page, detail::acq_rel), want - got);
    if (have <= static_cast<std::int64_t>(want)) hint.compare_exchange_strong(e, no_entry, detail::relaxed);
    return {x, static_cast<std::uint32_t>(got), 0};
  }

  // Pages (at most `want`, at least one): from this SM's chunk, else from
  // chunks taken off the front until one yields some.
  GPUALLOC_HD __attribute__((noinline)) static holding claim_chunk(heap h, unsigned c, std::uint64_t want) {
    if (const holding mine = claim_in_place(h, c, want); mine.left != 0) return mine;
    queue_control& q = h.queue(c);
    for (detail::backoff b;;) {
      if (!q.fill.try_take(1)) {
        // The chunks with the granted pages are held by others, or being
        // queued; one of them may have become this SM's hint meanwhile.
        if (const holding mine = claim_in_place(h, c, want); mine.left != 0) return mine;
        b.pause();
        continue;
      }
      const entry e = Storage::template take<entry>(h, c, q.ends.reserve_front(1));
      const auto x = static_cast<std::uint32_t>(e);
      const auto t = static_cast<std::uint32_t>(e >> 32);
      const std::uint64_t old = state(h, x).fetch_sub(want * one_page, detail::acquire);
      if (!matches(old, t, c)) {  // C3: stale
        added(h, x, state(h, x).fetch_add(want * one_page, detail::acq_rel), want);
        Storage::template release_slots<entry>(h, c, 1);
        continue;
      }
      const std::int64_t have = count(old);
      const std::uint64_t got = claimable(have, want);
      if (got < want) state(h, x).fetch_add((want - got) * one_page, detail::relaxed);
      if (have > static_cast<std::int64_t>(want)) {
        enqueue(h, c, e);  // RE_ENQUEUE
        sm_chunk(h, c).store(e, detail::relaxed);
      } else
        unqueue(h, c, x, t);  // DEQUEUE
      if (got != 0) return {x, static_cast<std::uint32_t>(got), 0};
    }
  }

  // C1: a holder lets go of a chunk it found empty, then re-checks.
  GPUALLOC_HD static void unqueue(heap h, unsigned c, std::uint32_t x, std::uint32_t t) {
    auto s = state(h, x);
    std::uint64_t v = s.load(detail::relaxed);
    while (matches(v, t, c) && (v & queued) != 0)
      if (s.compare_exchange_weak(v, v & ~queued, detail::acq_rel, detail::relaxed)) return requeue(h, c, x, t);
  }

  // C1: queues the chunk if it is live with that tag, unqueued and has free pages.
  GPUALLOC_HD static void requeue(heap h, unsigned c, std::uint32_t x, std::uint32_t t) {
    auto s = state(h, x);
    std::uint64_t v = s.load(detail::acquire);
    while (matches(v, t, c) && (v & queued) == 0 && count(v) > 0)
      if (s.compare_exchange_weak(v, v | queued, detail::acq_rel, detail::acquire))
        return enqueue(h, c, make_entry(t, x));
  }

  // C2: an add of n pages that returned `old`.
  GPUALLOC_HD static void added(heap h, std::uint32_t x, std::uint64_t old, std::uint64_t n) {
    const std::uint64_t now = old + n * one_page;
    if ((now & live) != 0 && (now & queued) == 0 && count(now) > 0)
      requeue(h, static_cast<unsigned>(now & size_mask), x, tag(now));
  }

  // A free that made the chunk wholly free, or found it unqueued.
  GPUALLOC_HD __attribute__((noinline)) static void freed_rare(heap h, unsigned c, std::uint32_t x, std::uint64_t n,
                                                               std::uint64_t old) {
    const std::uint32_t pages = pages_per_chunk(c);
    if ((old & live) != 0 && count(old) + static_cast<std::int64_t>(n) == pages && retire(h, c, x, tag(old), pages - n))
      return;
    added(h, x, old, n);
    h.queue(c).sem.signal(n);
  }

  // C4 for a chunk whose count was found whole: its `counted` pages (those
  // the semaphore holds) taken off the semaphore, unless that leaves less
  // than a chunk's worth (the paper's lower fill level), then the chunk
  // given back; false, and the semaphore as it was, when either fails.
  GPUALLOC_HD static bool retire(heap h, unsigned c, std::uint32_t x, std::uint32_t t, std::uint64_t counted) {
    queue_control& q = h.queue(c);
    if (!q.sem.try_reduce(counted, pages_per_chunk(c))) return false;
    const std::uint64_t left = give_back(h, c, x, t);
    if (left == ~std::uint64_t{0}) {
      q.sem.signal(counted);
      return false;
    }
    // C5: the chunk's queue slot goes back with it, unless a stale entry holds it.
    Storage::template give_pages<entry>(h, c, x, (left & queued) == 0 ? 1 : 0);
    return true;
  }

  // C4: the state word as it was when the chunk was taken out of use, or all ones.
  GPUALLOC_HD static std::uint64_t give_back(heap h, unsigned c, std::uint32_t x, std::uint32_t t) {
    auto s = state(h, x);
    detail::backoff b;
    for (int tries = 0; tries < 4; ++tries, b.pause()) {
      std::uint64_t v = s.load(detail::acquire);
      if (!matches(v, t, c)) break;
      if (count(v) != pages_per_chunk(c)) continue;  // a stale holder's subtraction, for a moment
      if (s.compare_exchange_strong(v, std::uint64_t{t} << 8, detail::acq_rel, detail::relaxed)) return v;
    }
    return ~std::uint64_t{0};
  }
};

}  // namespace gpualloc::strategies::ouro
