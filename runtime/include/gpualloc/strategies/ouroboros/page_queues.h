// Page queues (Ouroboros' P variants; Winter et al., ICS 2020, section 4.1,
// Algorithm 3): the first of the strategy's two choices, what a queue holds.
// Queue c holds the indices (chunk << 9 | page) of free pages of size c
// (layout.h: 16 B .. 8 KiB, and 384 B .. 6 KiB on chunks of three).
//
// malloc (a group of lanes asking for pages of size c): the leader waits on
// the queue's bulk semaphore for n pages (detail/bulk_semaphore.h; one
// fetch-add when the queue holds them) and reserves n front positions with
// one fetch-add; each lane takes the index at its position (storage.h's
// take_for_group: VA counts the group's takes together).
// When the queue runs short, one thread per shortfall takes chunks from the
// pool (refill), signals their pages and enqueues all of them.
// free: the leader reserves n back positions and signals n pages (signal
// before enqueue, as Algorithm 3: a taker granted a page whose enqueue has
// not landed yet waits on that slot); each lane puts its index.
//
// Invariants
//  P1 The semaphore's count never exceeds the indices in the queue plus
//     those being enqueued by threads that already signalled them, so a
//     thread granted a page finds an index at its position (it may wait).
//  P2 Every page of size c that exists (carved and not given back) has a
//     queue slot reserved for it (storage.h, Q4): a static queue caps the
//     pages of its size at its ring's size, a virtualised one reserves queue
//     chunks as pages are carved. An enqueue never finds its queue full.
//
// Giving chunks back. As the paper says, a page queue cannot give a chunk
// back on its own: the chunk's free pages are scattered through the queue.
// Here a drain does it when the pool runs dry (a refill or a large request
// finds no chunk): under the pool's reclaim lock, one thread takes every
// counted page out of every queue that gained a chunk's worth of free pages
// since its last fruitless drain, threads them into per-chunk lists through
// the free pages themselves, gives back every chunk whose pages all came out,
// and puts the rest back. The hot paths pay nothing for it; the drain costs
// one pass over the free pages (one thread: slow on a GPU for millions of
// free pages, but only when memory runs out with another size's pages free).
//
// Memory ordering: the page's bytes travel with its index through the queue
// slots (release put, acquire take); the semaphore only counts.
#pragma once

#include <cstdint>

#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/strategies/ouroboros/chunk_pool.h"
#include "gpualloc/strategies/ouroboros/layout.h"

namespace gpualloc::strategies::ouro {

template <class Storage>
struct page_queues {
  using entry = std::uint32_t;  // chunk << page_index_bits | page

  // The most a queue may ever hold.
  static std::uint64_t max_entries(unsigned c, std::uint64_t chunks) {
    return chunks / span_of(c) * pages_per_chunk(c);
  }
  // The drain's per-chunk arrays: pages drained, list head, next chunk on the drained list.
  static constexpr std::uint64_t per_chunk_bytes = 3 * sizeof(std::uint32_t);
  static constexpr std::uint64_t fixed_bytes = 0;  // nothing besides

  GPUALLOC_HD static void init(heap h, std::uint64_t thread, std::uint64_t threads) {
    for (std::uint64_t x = thread; x < h.L.chunks; x += threads) drained_pages(h)[x] = 0;
  }

  // Lanes of `g` (same size c) each get a page, or NULL when the heap is out of memory.
  GPUALLOC_HD static void* malloc(heap h, unsigned c, const detail::lane_group& g) {
    std::uint64_t grant = 0;  // first position << 6 | pages granted (at most 32)
    if (g.is_leader()) {
      queue_control& q = h.queue(c);
      const std::uint32_t n = g.size();
      grant = q.sem.try_wait(n) ? q.ends.reserve_front(n) << 6 | n : wait(h, c, n);
    }
    grant = g.broadcast(grant);
    const auto granted = static_cast<std::uint32_t>(grant & 63);
    if (granted == 0) return nullptr;
    const entry e = Storage::template take_for_group<entry>(h, c, grant >> 6, granted, g);
    return g.rank() < granted ? page(h, c, e) : nullptr;
  }

  // Lanes of `g` each free a page of size c: page `page` of the chunk starting at base chunk `x`.
  GPUALLOC_HD static void free(heap h, unsigned c, std::uint32_t x, std::uint32_t page, const detail::lane_group& g) {
    std::uint64_t pos = 0;
    if (g.is_leader()) {
      queue_control& q = h.queue(c);
      pos = q.ends.reserve_back(g.size());
      q.sem.signal(g.size());
    }
    pos = g.broadcast(pos);
    Storage::template put<entry>(h, c, pos + g.rank(), x << page_index_bits | page);
  }

  // The lanes of a free are grouped by page size (one back reservation each).
  GPUALLOC_HD static std::uint64_t free_key(unsigned c, std::uint32_t) { return c; }

  // Gives back whole free chunks when the pool is dry; true if worth trying again.
  GPUALLOC_HD static bool reclaim(heap h) {
    detail::device_atomic<std::uint32_t> lock(h.pool().reclaim_lock);
    std::uint32_t unlocked = 0;
    if (!lock.compare_exchange_strong(unlocked, 1, detail::acquire, detail::relaxed)) {
      detail::backoff b;
      while (lock.load(detail::acquire) != 0) b.pause();
      return true;  // someone else drained meanwhile
    }
    const bool gave = drain(h);
    lock.store(0, detail::release);
    return gave;
  }

 private:
  GPUALLOC_HD static std::byte* page(heap h, unsigned c, entry e) {
    return h.chunk(e >> page_index_bits) +
           ((std::uint64_t{e & ((1u << page_index_bits) - 1)} * span_of(c)) << shift_of(c));
  }

  GPUALLOC_HD static std::uint32_t* drained_pages(heap h) { return h.at<std::uint32_t>(h.L.content); }
  GPUALLOC_HD static std::uint32_t* list_head(heap h) { return drained_pages(h) + h.L.chunks; }
  GPUALLOC_HD static std::uint32_t* next_drained(heap h) { return drained_pages(h) + 2 * std::uint64_t{h.L.chunks}; }

  // The semaphore's slow path (when the pool is dry: a drain and one more
  // try); returns the grant as malloc() wants it.
  GPUALLOC_HD __attribute__((noinline)) static std::uint64_t wait(heap h, unsigned c, std::uint32_t n) {
    queue_control& q = h.queue(c);
    for (bool drained = false;; drained = true) {
      const std::uint32_t got = q.sem.wait(n, pages_per_chunk(c), [&](std::uint64_t k) { return refill(h, c, k); });
      if (got == n || drained || !reclaim(h)) return got == 0 ? 0 : q.ends.reserve_front(got) << 6 | got;
      q.sem.signal(got);
    }
  }

  // Algorithm 3's allocChunk, k times: a chunk from the pool, its pages signalled, then enqueued.
  GPUALLOC_HD static std::uint64_t refill(heap h, unsigned c, std::uint64_t k) {
    queue_control& q = h.queue(c);
    const std::uint32_t n = pages_per_chunk(c);
    for (std::uint64_t got = 0; got < k; ++got) {
      const std::uint32_t x = chunk_pool::take_for_pages<Storage, entry>(h, c, n);
      if (x == no_chunk) return got;
      const std::uint64_t pos = q.ends.reserve_back(n);
      q.sem.signal_expected(n);
      for (std::uint32_t i = 0; i < n; ++i) Storage::template put<entry>(h, c, pos + i, x << page_index_bits | i);
    }
    return k;
  }

  // Under the reclaim lock. Plain accesses to the drain's arrays and to the
  // pages taken out: the lock orders one drain after the other.
  GPUALLOC_HD static bool drain(heap h) {
    std::uint32_t* count = drained_pages(h);
    std::uint32_t* head = list_head(h);
    std::uint32_t* next = next_drained(h);
    std::uint32_t touched = no_chunk;
    std::uint64_t taken[page_classes] = {}, freed[page_classes] = {};
    for (unsigned c = 0; c < page_classes; ++c) {
      queue_control& q = h.queue(c);
      if (q.sem.available() < static_cast<std::int64_t>(q.drained + pages_per_chunk(c))) continue;
      taken[c] = q.sem.take_up_to(~std::uint64_t{0} >> 1);
      const std::uint64_t pos = q.ends.reserve_front(taken[c]);
      for (std::uint64_t i = 0; i < taken[c]; ++i) {
        const entry e = Storage::template take<entry>(h, c, pos + i);
        const std::uint32_t x = e >> page_index_bits;
        *reinterpret_cast<std::uint32_t*>(page(h, c, e)) = head[x];
        head[x] = e;
        if (count[x]++ == 0) {
          next[x] = touched;
          touched = x;
        }
      }
    }
    bool gave = false;
    for (std::uint32_t x = touched; x != no_chunk;) {
      const std::uint32_t after = next[x];
      const unsigned c = descriptor::sub(h.load_desc(x));
      const std::uint32_t n = count[x];
      count[x] = 0;
      if (n == pages_per_chunk(c)) {
        Storage::template give_pages<entry>(h, c, x, n);
        ++freed[c];
        gave = true;
      } else {
        queue_control& q = h.queue(c);
        const std::uint64_t pos = q.ends.reserve_back(n);
        q.sem.signal(n);
        entry e = head[x];
        for (std::uint32_t i = 0; i < n; ++i) {
          const entry following = *reinterpret_cast<std::uint32_t*>(page(h, c, e));
          Storage::template put<entry>(h, c, pos + i, e);
          e = following;
        }
      }
      x = after;
    }
    for (unsigned c = 0; c < page_classes; ++c)
      if (taken[c] != 0) h.queue(c).drained = taken[c] - freed[c] * pages_per_chunk(c);
    return gave;
  }
};

}  // namespace gpualloc::strategies::ouro
