// How an Ouroboros queue is stored (Winter et al., ICS 2020, sections 4 and
// 5, Figure 2): the second of the strategy's two choices. Each policy maps a
// queue position (64-bit, never wrapping; detail/index_queue.h) to a slot and
// keeps the slots' memory:
//
//   static_queue  (S)   a ring of slots per page size in the arena, sized by
//                       the plan: static, so a page size can have at most as
//                       many pages (page queues) as its ring has slots
//   array_queue   (VA)  slots on queue chunks taken from the pool; a small
//                       ring of chunk pointers in the arena says which chunk
//                       holds positions [k*spots, (k+1)*spots): its entry is
//                       (k, chunk), so a reader can tell a stale one
//   list_queue    (VL)  slots on queue chunks linked one to the next; the
//                       queue keeps pointers to the chunk of its front, of its
//                       back and to the oldest chunk not yet recycled, which
//                       lags `lag` chunks behind the front (Algorithm 6)
//
// A queue chunk is nothing but slots (2048 page entries or 1024 chunk
// entries); what the paper keeps in its header lives in per-chunk arrays
// beside the descriptors: the count of takes (VA, by groups: below) or of
// puts and takes (VL, the paper's countA / countB, by segments: below), and
// the link to the next chunk (VL). The thread that puts at the first
// position of chunk k places chunk k+1 in advance (VA; VL: k+2, below), and
// chunk 0 too for position 0, so other threads rarely wait for a chunk; the
// thread whose count completes a chunk recycles it (VA), or moves the front
// or back along (VL; the oldest chunk is recycled once the front is more
// than `lag` chunks ahead).
//
// VL placement. In the paper the placer of chunk k+1 walks to chunk k and
// sets its link, which it can do only once chunk k is linked: placements are
// serial, one walk's wake-up after the other (P-VL's 2^20 frees of 16 B
// pages: 512 links, 1.1 ms on an H200, ncu: lanes sleeping on the list's
// last link). Here the put at the first position of chunk k makes chunk
// k+2 (two ahead: a put into chunk k+1 finds it linked) and leaves it in a
// mailbox (slot (k+2) % made_slots of the queue's ring), where the placer of
// chunk k+3 finds it without a walk to link from it, so placements run side
// by side; it walks when the mailbox does not hold it (not written yet, or
// made_slots chunks on). Every other put and take walks the links, from the
// back or the front, or from where the last walk on its SM ended (a hint)
// when that is nearer.
// Measured on an H200 (2^20 threads, warm heap): with a mailbox of 8 and one
// chunk ahead, P-VL's frees of 16 B pages 3.2 -> 1.05 ms, of 64 B 1.1 ->
// 0.92-1.03 ms; two ahead, C-VL's 16 B allocations 2.4 -> 1.5 ms (a
// re-enqueue no longer waits for its chunk's link), P-VL's frees 1.15-1.30
// ms. ncu then showed the puts' walks spinning on links not yet set (8.7 of
// 10.3 million walk steps, P-VL's frees of 64 B pages): a burst of 2^20 puts
// makes 512 chunks at once, so a mailbox of 8 mostly missed and placements
// walked one after the other again. A mailbox of 512 with hints: frees
// 0.87-0.94 ms at 16 B - 4 KiB (the original code's P-VL: 7.7-9.9 ms, its
// P-S and P-VA 0.86-0.94, same H200); a mailbox of 512 alone 1.14-1.18,
// hints alone 0.97-1.10. A mailbox of 16 that kept each chunk until both its
// placers had read it (no walks at all) left P-VL's frees at 1.21-1.27 ms
// and made C-VL's 16 B allocations 2.45 ms: not kept. (Its first form let
// the makers of chunks j and j + 16, both waiting for the slot, write in
// either order, and deadlocked; the host test `list queue placement`
// catches that.)
//
// Counts. The paper counts every put or take on the chunk's count: one
// address for 2048 of them, each with its fence (VL's counts are
// sequentially consistent). Measured on an H200 (2^20 takes of 16 B pages,
// warm heap, VA): 0.41 ms with a count per take.
//  VA counts by groups: the lanes of a malloc look at their chunk pointer
//     and slot until a vote says all found their index (so they are still
//     together), and the leader counts them with one add per chunk they
//     span; a take alone (C variants, drains) counts itself. The count that
//     completes the chunk's takes recycles it. The same 2^20 takes: 0.126 ms.
//  VL counts by segments: a queue chunk's slots are each put and taken once
//     per life (detail/index_queue.h once_slot: the take leaves a mark), and
//     the thread that puts or takes a segment's last position (every 32nd)
//     waits until the segment's slots are all put or all taken and counts
//     the segment for all 32; the counts that complete a chunk's puts and its
//     takes move the list's back and front. (VA counted so too: 0.20 ms;
//     segments of 256 took 0.58 ms, a segment's last taker waiting for more
//     warps; checking all 2048 slots once per chunk took 0.10 ms but doubled
//     mixed sizes, whose small groups check alone.)
//
// Invariants
//  Q1 Every position is put once and taken once; a take waits for its put.
//  Q2 A queue chunk is recycled only after the front and the back (VL) have
//     both moved more than `lag` chunks past it (VA: after all its takes
//     were counted). So every put and take on it, its count updates and
//     the pointer moves that read its link have happened: a thread holding
//     a position (not yet put or taken) always finds that position's chunk
//     alive, and no list pointer ever names a recycled chunk. (Recycling
//     when the front alone had passed let a put that was slow between its
//     slot write and its count update, or its move of the back, meet the
//     chunk reused: the back moved along the new chunk's unset link, and
//     ouroboros-c-vl, whose queues hold a few dozen entries, read a
//     descriptor 32 GiB past the arena. A CPU probe of the list queue with
//     two shallow queues sharing the pool saw the back name a recycled
//     chunk in every run, and never with both pointers checked.)
//  Q3 Only metadata is read on the way to a chunk: the pointer ring (VA), the
//     descriptors, the links, the mailbox and the walk hints (VL), all
//     outside the chunks. A mailbox slot names chunk k only to the puts at
//     the first positions of chunks k - 1 and k, which keep the back, and so
//     chunk k, from moving on (Q2). A VL traversal that started from a stale
//     pointer or hint may read a link of a chunk recycled under it and end
//     at a wrong chunk; it checks the descriptor (queue, ordinal) of the
//     chunk it ends at and starts again from the queue's pointer if that is
//     not the one it looks for. So the paper's lag is a speed heuristic
//     here, not what keeps readers safe.
//  Q4 Enqueues never wait for memory the program holds: queue chunks come
//     out of reservations. A queue reserves ceil(slots / spots) + a few
//     chunks (the partly used chunks at both ends, those made in advance,
//     the lag), where `slots` counts every page (page queues) or two entries
//     per chunk (chunk queues) that could ever be in it; the reservation is
//     made when a data chunk is taken for the page size and returned with it,
//     as shares of the pool (chunk_pool.h), so the chunks a queue may need
//     are promised without a counter of its own.
//     Only a slow thread holding a used-up chunk can push a queue past its
//     reservation; a chunk taker then waits for memory that thread returns.
//  VL pointers (front, back, old) are ordinal << 32 | chunk and move only by
//     compare-and-swap, so an old value can never match again (no ABA).
//     Moving front or back reads the next chunk's counts; the counts' updates
//     and the pointer CASes are sequentially consistent, so that of a thread
//     that fills chunk k+1 while chunk k is not yet full and the thread that
//     fills chunk k, one sees the other and the pointer cannot stall.
//
// Memory ordering: slots as detail/index_queue.h. A new chunk's slots, its
// counters and its descriptor are written before it is published with a
// release (ring entry, link, list pointer), read after an acquire. VA: a
// group's leader counts after group.sync() (which orders its lanes' reads
// before its count) with acq_rel, as does a lane counting its own take. VL:
// a segment's counter acquires the slots it waited for (once_slot) and
// counts with seq_cst. Either way the thread that recycles comes after
// every put and take.
#pragma once

#include <cstdint>

#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/index_queue.h"
#include "gpualloc/detail/sm.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/strategies/ouroboros/chunk_pool.h"
#include "gpualloc/strategies/ouroboros/layout.h"

namespace gpualloc::strategies::ouro {

template <class Entry>
inline constexpr std::uint64_t spots = chunk_bytes / sizeof(Entry);

// Positions one count of puts or takes stands for (VL; above: counts).
inline constexpr std::uint64_t segment = 32;
static_assert(spots<std::uint64_t> % segment == 0);

// A queue's slot reservations: a limited count (S), or shares of the pool
// (VA, VL; chunk_pool.h).
struct slot_reservations {
  GPUALLOC_HD static detail::device_atomic<std::uint64_t> slots(heap h, unsigned c) {
    return detail::device_atomic<std::uint64_t>(h.queue(c).slots);
  }

  GPUALLOC_HD static bool reserve_limited(heap h, unsigned c, std::uint64_t n) {
    return detail::try_add_counted(slots(h, c), n, h.L.slot_limit[c]);
  }

  GPUALLOC_HD static void release_limited(heap h, unsigned c, std::uint64_t n) {
    slots(h, c).fetch_sub(n, detail::relaxed);
  }

  // Backed: a slot of `entry_bytes` costs entry_bytes / 4 shares of a
  // chunk, and a queue's first reservation also reserves `base` + 1 whole
  // chunks for good (the partly used chunks at both ends, those made in
  // advance, the lag, and the rounding up of its slots to whole chunks), so
  // the shares a queue holds always cover ceil(slots / spots) + base chunks.
  GPUALLOC_HD static bool reserve_backed(heap h, unsigned c, std::uint64_t n, std::uint64_t entry_bytes,
                                         std::uint64_t base) {
    auto based = slots(h, c);
    if (based.load(detail::relaxed) == 0) {
      if (!chunk_pool::reserve(h, base + 1)) return false;
      std::uint64_t none = 0;
      if (!based.compare_exchange_strong(none, 1, detail::relaxed, detail::relaxed))
        chunk_pool::unreserve(h, base + 1);  // another thread reserved it first
    }
    return chunk_pool::reserve_shares(h, shares(n, entry_bytes));
  }

  GPUALLOC_HD static void release_backed(heap h, std::uint64_t n, std::uint64_t entry_bytes) {
    chunk_pool::unreserve_shares(h, shares(n, entry_bytes));
  }
  GPUALLOC_HD static std::uint64_t shares(std::uint64_t n, std::uint64_t entry_bytes) { return n * entry_bytes / 4; }
};

// Slots reserved as shares of the pool (VA, VL; Queue::spare_chunks is the
// base). A chunk of pages goes back with its slots in one add to the pool's
// count: C frees of 8 KiB pages each give a chunk back, and two adds on
// that one word made 2^20 of them take 2.8 ms, one 1.9 ms (C-VA, H200).
template <class Queue>
struct pool_slots {
  template <class Entry>
  GPUALLOC_HD static bool reserve_slots(heap h, unsigned c, std::uint64_t n) {
    return slot_reservations::reserve_backed(h, c, n, sizeof(Entry), Queue::spare_chunks);
  }
  template <class Entry>
  GPUALLOC_HD static void release_slots(heap h, unsigned, std::uint64_t n) {
    slot_reservations::release_backed(h, n, sizeof(Entry));
  }
  // Gives back chunk x of size-c pages with n of its queue's slots.
  template <class Entry>
  GPUALLOC_HD static void give_pages(heap h, unsigned c, std::uint32_t x, std::uint64_t n) {
    chunk_pool::give(h, x, span_of(c), slot_reservations::shares(n, sizeof(Entry)));
  }
};

// Storage whose lanes take their positions one by one (S, VL): the group
// form of take, for lanes ranked below n taking positions first + rank.
template <class Storage>
struct takes_by_lane {
  template <class Entry>
  GPUALLOC_HD static Entry take_for_group(heap h, unsigned c, std::uint64_t first, std::uint32_t n,
                                          const detail::lane_group& g) {
    return g.rank() < n ? Storage::template take<Entry>(h, c, first + g.rank()) : detail::index_slot<Entry>::empty;
  }
};

// Sets every entry of the queues' rings (VA and VL: chunk or list pointers,
// 64-bit) to `value`; grid-stride, at init.
GPUALLOC_INLINE void fill_pointer_rings(heap h, std::uint64_t value, std::uint64_t thread, std::uint64_t threads) {
  for (unsigned c = 0; c < page_classes; ++c) {
    std::uint64_t* ring = h.at<std::uint64_t>(h.L.ring[c]);
    for (std::uint64_t i = thread; i <= h.L.ring_mask[c]; i += threads)
      detail::device_atomic<std::uint64_t>(ring[i]).store(value, detail::relaxed);
  }
}

// Queue chunks for the virtualised queues.
struct queue_chunk {
  // Fills a chunk taken for queue c with empty slots and publishes its
  // descriptor (queue c, ordinal k); the caller has set its counters.
  template <class Entry>
  GPUALLOC_HD static void publish(heap h, std::uint32_t x, unsigned c, std::uint64_t k) {
    // Slot by slot (relaxed atomic stores). Plain 16-byte stores instead
    // made P-VA's frees 2x slower (0.175 -> 0.36 ms, H200), not faster.
    Entry* s = reinterpret_cast<Entry*>(h.chunk(x));
    for (std::uint64_t i = 0; i < spots<Entry>; ++i) detail::index_slot<Entry>::clear(s[i]);
    h.store_desc(x, descriptor::make(descriptor::queue, c, k));
  }

  template <class Entry>
  GPUALLOC_HD static Entry& slot(heap h, std::uint32_t x, std::uint64_t pos) {
    return reinterpret_cast<Entry*>(h.chunk(x))[pos % spots<Entry>];
  }
};

struct static_queue : takes_by_lane<static_queue> {
  // Ring entries for a queue that may ever hold `max_entries`: all of them,
  // but about 1/256 of the arena at most (the nearest power of two), the S
  // variants' price: a page size can have at most that many pages.
  template <class Entry>
  static std::uint64_t ring_entries(std::uint64_t max_entries, std::uint64_t arena_bytes) {
    std::uint64_t cap = 64;
    while (cap * sizeof(Entry) * 3 / 2 <= arena_bytes / 256) cap *= 2;
    std::uint64_t n = 1;
    while (n < max_entries && n < cap) n *= 2;
    return n;
  }
  template <class Entry>
  static constexpr std::uint64_t ring_entry_bytes = sizeof(Entry);
  static constexpr std::uint64_t per_chunk_bytes = 0;
  static constexpr bool limited = true;  // slot_limit[c] = the ring's size

  template <class Entry>
  GPUALLOC_HD static void init(heap h, std::uint64_t thread, std::uint64_t threads) {
    for (unsigned c = 0; c < page_classes; ++c) {
      Entry* ring = h.at<Entry>(h.L.ring[c]);
      for (std::uint64_t i = thread; i <= h.L.ring_mask[c]; i += threads) detail::index_slot<Entry>::clear(ring[i]);
    }
  }

  template <class Entry>
  GPUALLOC_HD static bool reserve_slots(heap h, unsigned c, std::uint64_t n) {
    return slot_reservations::reserve_limited(h, c, n);
  }
  template <class Entry>
  GPUALLOC_HD static void release_slots(heap h, unsigned c, std::uint64_t n) {
    slot_reservations::release_limited(h, c, n);
  }
  // Gives back chunk x of size-c pages with n of its queue's slots.
  template <class Entry>
  GPUALLOC_HD static void give_pages(heap h, unsigned c, std::uint32_t x, std::uint64_t n) {
    if (n != 0) release_slots<Entry>(h, c, n);
    chunk_pool::give(h, x, span_of(c));
  }

  template <class Entry>
  GPUALLOC_HD static void put(heap h, unsigned c, std::uint64_t pos, Entry e) {
    detail::index_slot<Entry>::put(ring<Entry>(h, c).at(pos), e);
  }
  template <class Entry>
  GPUALLOC_HD static Entry take(heap h, unsigned c, std::uint64_t pos) {
    return detail::index_slot<Entry>::take(ring<Entry>(h, c).at(pos));
  }

 private:
  template <class Entry>
  GPUALLOC_HD static detail::index_ring<Entry> ring(heap h, unsigned c) {
    return {h.at<Entry>(h.L.ring[c]), h.L.ring_mask[c]};
  }
};

struct array_queue : pool_slots<array_queue> {
  static constexpr std::uint64_t empty = ~std::uint64_t{0};  // a chunk-pointer ring entry with no chunk
  static constexpr std::uint64_t spare_chunks = 3;           // both ends partly used, one placed in advance

  // Chunk pointers for a queue that may ever hold `max_entries` (each names a chunk of spots entries).
  template <class Entry>
  static std::uint64_t ring_entries(std::uint64_t max_entries, std::uint64_t) {
    std::uint64_t n = 8;
    while (n < (max_entries + spots<Entry> - 1) / spots<Entry> + spare_chunks + 2) n *= 2;
    return n;
  }
  template <class Entry>
  static constexpr std::uint64_t ring_entry_bytes = sizeof(std::uint64_t);
  static constexpr std::uint64_t per_chunk_bytes = sizeof(std::uint32_t);  // takes counted on a queue chunk
  static constexpr bool limited = false;

  template <class Entry>
  GPUALLOC_HD static void init(heap h, std::uint64_t thread, std::uint64_t threads) {
    fill_pointer_rings(h, empty, thread, threads);
  }

  template <class Entry>
  GPUALLOC_HD static void put(heap h, unsigned c, std::uint64_t pos, Entry e) {
    const std::uint64_t k = pos / spots<Entry>;
    if (pos % spots<Entry> == 0) {
      if (k == 0) place<Entry>(h, c, 0);
      place<Entry>(h, c, k + 1);
    }
    detail::index_slot<Entry>::put(queue_chunk::slot<Entry>(h, locate(h, c, k), pos), e);
  }

  template <class Entry>
  GPUALLOC_HD static Entry take(heap h, unsigned c, std::uint64_t pos) {
    const std::uint64_t k = pos / spots<Entry>;
    const std::uint32_t x = locate(h, c, k);
    const Entry e = detail::once_slot<Entry>::read(queue_chunk::slot<Entry>(h, x, pos));
    count_takes<Entry>(h, c, k, x, 1);
    return e;
  }

  // Lanes ranked below n take positions first + rank, counted by groups
  // (above). The wait for chunks and puts is one loop for the whole group,
  // ended by a vote, so the lanes stay together for the leader's count.
  template <class Entry>
  GPUALLOC_HD static Entry take_for_group(heap h, unsigned c, std::uint64_t first, std::uint32_t n,
                                          const detail::lane_group& g) {
    const bool mine = g.rank() < n;
    const std::uint64_t pos = first + g.rank(), k = pos / spots<Entry>;
    std::uint32_t x = no_chunk;
    Entry e = detail::once_slot<Entry>::empty;
    for (detail::backoff b;; b.pause()) {
      if (mine && e == detail::once_slot<Entry>::empty) {
        if (x == no_chunk) x = placed(h, c, k);
        if (x != no_chunk) e = detail::once_slot<Entry>::look(queue_chunk::slot<Entry>(h, x, pos));
      }
      if (g.all(!mine || e != detail::once_slot<Entry>::empty)) break;
    }
    const std::uint64_t room = spots<Entry> - first % spots<Entry>;  // positions of chunk k from first on
    // The whole group in chunk k (uniform: first and n are the group's): no
    // shuffle for a second chunk (P-VA's 2^20 takes of 16 B pages, H200:
    // 0.126 -> 0.122 ms; 64 B 3.30x -> 3.19x atomic).
    if (room >= n) {
      g.sync();  // every lane's read comes before the leader's count
      if (g.is_leader()) count_takes<Entry>(h, c, k, x, n);
      return e;
    }
    const auto last = static_cast<std::uint32_t>(g.shuffle_from_rank(x, n - 1));  // chunk k + 1
    g.sync();
    if (g.is_leader()) {
      count_takes<Entry>(h, c, k, x, room);
      count_takes<Entry>(h, c, k + 1, last, n - room);
    }
    return e;
  }

 private:
  GPUALLOC_HD static std::uint32_t& takes(heap h, std::uint32_t x) { return h.at<std::uint32_t>(h.L.storage)[x]; }

  // Counts n takes on chunk x (ordinal k); the count that completes it recycles x.
  template <class Entry>
  GPUALLOC_HD static void count_takes(heap h, unsigned c, std::uint64_t k, std::uint32_t x, std::uint64_t n) {
    if (detail::device_atomic<std::uint32_t>(takes(h, x)).fetch_add(static_cast<std::uint32_t>(n), detail::acq_rel) +
            n ==
        spots<Entry>)
      recycle(h, c, k, x);
  }
  GPUALLOC_HD __attribute__((noinline)) static void recycle(heap h, unsigned c, std::uint64_t k, std::uint32_t x) {
    detail::device_atomic<std::uint64_t>(pointer(h, c, k)).store(empty, detail::release);
    chunk_pool::give_from_queue(h, x);
  }
  GPUALLOC_HD static std::uint64_t& pointer(heap h, unsigned c, std::uint64_t k) {
    return h.at<std::uint64_t>(h.L.ring[c])[k & h.L.ring_mask[c]];
  }
  GPUALLOC_HD static std::uint64_t entry(std::uint64_t k, std::uint32_t x) { return (k & 0xffffffffu) << 32 | x; }

  // The chunk of positions [k*spots, (k+1)*spots), or no_chunk while it is not placed.
  GPUALLOC_HD static std::uint32_t placed(heap h, unsigned c, std::uint64_t k) {
    const std::uint64_t v = detail::device_atomic<std::uint64_t>(pointer(h, c, k)).load(detail::acquire);
    return v != empty && v >> 32 == (k & 0xffffffffu) ? static_cast<std::uint32_t>(v) : no_chunk;
  }
  // The same, once it is placed.
  GPUALLOC_HD static std::uint32_t locate(heap h, unsigned c, std::uint64_t k) {
    detail::backoff b;
    std::uint32_t x;
    while ((x = placed(h, c, k)) == no_chunk) b.pause();
    return x;
  }

  // Takes a chunk for ordinal k and places it once the ring entry is free (chunk k - ring size recycled).
  template <class Entry>
  GPUALLOC_HD __attribute__((noinline)) static void place(heap h, unsigned c, std::uint64_t k) {
    const std::uint32_t x = chunk_pool::take_for_queue(h);
    detail::device_atomic<std::uint32_t>(takes(h, x)).store(0, detail::relaxed);
    queue_chunk::publish<Entry>(h, x, c, k);
    detail::device_atomic<std::uint64_t> p(pointer(h, c, k));
    detail::backoff b;
    for (std::uint64_t v = empty; !p.compare_exchange_weak(v, entry(k, x), detail::release, detail::relaxed); v = empty)
      b.pause();
  }
};

struct list_queue : takes_by_lane<list_queue>, pool_slots<list_queue> {
  static constexpr std::uint64_t none = ~std::uint64_t{0};  // a list pointer before the queue's first chunk
  static constexpr std::uint32_t lag = 1;                   // chunks kept behind the front before recycling
  static constexpr std::uint64_t spare_chunks = 4 + lag;  // both ends partly used, two made in advance, the lag

  // The queue's ring holds list pointers: the mailbox of chunks made in
  // advance (chunk k at k % made_slots, for its placer: VL placement), then
  // the walk hints, per end (back, front) and SM the last chunk a long walk
  // from that SM found (SMs share a hint modulo hints_per_end). 512 slots:
  // a burst of 2^20 puts makes 512 chunks.
  static constexpr std::uint64_t made_slots = 512, hints_per_end = 256;
  template <class Entry>
  static std::uint64_t ring_entries(std::uint64_t, std::uint64_t) {
    return made_slots + 2 * hints_per_end;
  }
  template <class Entry>
  static constexpr std::uint64_t ring_entry_bytes = sizeof(std::uint64_t);
  // Per chunk: puts << 32 | takes (u64), then the next chunk (u32).
  static constexpr std::uint64_t per_chunk_bytes = sizeof(std::uint64_t) + sizeof(std::uint32_t);
  static constexpr bool limited = false;

  template <class Entry>
  GPUALLOC_HD static void init(heap h, std::uint64_t thread, std::uint64_t threads) {
    fill_pointer_rings(h, none, thread, threads);
  }

  template <class Entry>
  GPUALLOC_HD static void put(heap h, unsigned c, std::uint64_t pos, Entry e) {
    const std::uint64_t k = pos / spots<Entry>;
    const std::uint32_t x = pos % spots<Entry> == 0 ? extend<Entry>(h, c, k) : locate(h, c, back_end, k);
    Entry& s = queue_chunk::slot<Entry>(h, x, pos);
    detail::index_slot<Entry>::put(s, e);
    if (pos % segment == segment - 1) count_segment<Entry>(h, c, &s + 1 - segment, x, k, one_put);
  }

  template <class Entry>
  GPUALLOC_HD static Entry take(heap h, unsigned c, std::uint64_t pos) {
    const std::uint64_t k = pos / spots<Entry>;
    const std::uint32_t x = locate(h, c, front_end, k);
    Entry& s = queue_chunk::slot<Entry>(h, x, pos);
    const Entry e = detail::once_slot<Entry>::take(s);
    if (pos % segment == segment - 1) count_segment<Entry>(h, c, &s + 1 - segment, x, k, one_take);
    return e;
  }

 private:
  static constexpr std::uint64_t one_put = std::uint64_t{1} << 32, one_take = 1;
  enum end : unsigned { back_end, front_end };  // where a walk starts: puts from the back, takes from the front

  // By the thread at a segment's last position: once the segment's slots
  // (from `first`) are all put or all taken, counts the segment on chunk x
  // (ordinal k); the count that completes the chunk moves the back or the
  // front on (the back may be what held recycling up: Q2).
  template <class Entry>
  GPUALLOC_HD __attribute__((noinline)) static void count_segment(heap h, unsigned c, Entry* first, std::uint32_t x,
                                                                  std::uint64_t k, std::uint64_t one) {
    if (one == one_put)
      detail::once_slot<Entry>::all_put(first, segment);
    else
      detail::once_slot<Entry>::all_taken(first, segment);
    queue_control& q = h.queue(c);
    std::uint64_t& ptr = one == one_put ? q.list_back : q.list_front;
    const std::uint64_t n =
        detail::device_atomic<std::uint64_t>(counts(h, x)).fetch_add(segment * one, cuda::memory_order_seq_cst);
    if (count_of(n, one) + segment != spots<Entry>) return;
    advance<Entry>(h, ptr, x, k, one);
    recycle_old(h, q);
  }
  GPUALLOC_HD static std::uint64_t count_of(std::uint64_t counts, std::uint64_t one) {
    return one == one_put ? counts >> 32 : counts & 0xffffffffu;
  }

  GPUALLOC_HD static std::uint64_t& counts(heap h, std::uint32_t x) { return h.at<std::uint64_t>(h.L.storage)[x]; }
  GPUALLOC_HD static std::uint32_t& next(heap h, std::uint32_t x) {
    return h.at<std::uint32_t>(h.L.storage + h.L.chunks * sizeof(std::uint64_t))[x];
  }
  GPUALLOC_HD static std::uint64_t pointer(std::uint64_t k, std::uint32_t x) { return (k & 0xffffffffu) << 32 | x; }

  template <class Entry>
  GPUALLOC_HD __attribute__((noinline)) static std::uint32_t make(heap h, unsigned c, std::uint64_t k) {
    const std::uint32_t x = chunk_pool::take_for_queue(h);
    detail::device_atomic<std::uint64_t>(counts(h, x)).store(0, detail::relaxed);
    detail::device_atomic<std::uint32_t>(next(h, x)).store(no_chunk, detail::relaxed);
    queue_chunk::publish<Entry>(h, x, c, k);
    return x;
  }

  // The put at chunk k's first position: makes chunk k + 2 before it looks
  // for any chunk (so the first positions of many chunks make theirs in
  // parallel, as the paper says), leaves it in the mailbox and links it from
  // chunk k + 1; position 0 first makes chunks 0 and 1, linked. Chunks k and
  // k + 1 come from the mailbox, or by a walk (above: VL placement). Returns
  // chunk k. (Making after the walk put each make on the chain of links:
  // P-VL's 2^20 frees took 6.5-8.6 ms on an H200, 1.4 ms once made first.)
  template <class Entry>
  GPUALLOC_HD static std::uint32_t extend(heap h, unsigned c, std::uint64_t k) {
    queue_control& q = h.queue(c);
    const std::uint32_t ahead = make<Entry>(h, c, k + 2);
    detail::device_atomic<std::uint64_t>(made(h, c, k + 2)).store(pointer(k + 2, ahead), detail::release);
    if (k == 0) {
      const std::uint32_t first = make<Entry>(h, c, 0), second = make<Entry>(h, c, 1);
      detail::device_atomic<std::uint32_t>(next(h, first)).store(second, detail::relaxed);
      detail::device_atomic<std::uint64_t>(made(h, c, 1)).store(pointer(1, second), detail::release);
      const std::uint64_t p = pointer(0, first);
      for (std::uint64_t* ptr : {&q.list_old, &q.list_back, &q.list_front})
        detail::device_atomic<std::uint64_t>(*ptr).store(p, detail::release);
    }
    detail::device_atomic<std::uint32_t>(next(h, made_or_walk(h, c, k + 1))).store(ahead, detail::release);
    return made_or_walk(h, c, k);
  }

  // Chunk k from the mailbox, or by a walk from the back when the mailbox no
  // longer holds it. Only for the puts at the first positions of chunks
  // k - 1 and k (Q3).
  GPUALLOC_HD static std::uint32_t made_or_walk(heap h, unsigned c, std::uint64_t k) {
    const std::uint64_t m = detail::device_atomic<std::uint64_t>(made(h, c, k)).load(detail::acquire);
    return m != none && m >> 32 == (k & 0xffffffffu) ? static_cast<std::uint32_t>(m) : locate(h, c, back_end, k);
  }
  GPUALLOC_HD static std::uint64_t& made(heap h, unsigned c, std::uint64_t k) {
    return h.at<std::uint64_t>(h.L.ring[c])[k % made_slots];
  }
  GPUALLOC_HD static std::uint64_t& hint(heap h, unsigned c, end e) {
    return h.at<std::uint64_t>(h.L.ring[c])[made_slots + e * hints_per_end + (detail::sm_id() & (hints_per_end - 1))];
  }

  // The chunk of ordinal k, found from the list pointer of `e` by following
  // links (Q3), or from this SM's hint where that is nearer. The walk reads
  // the hint and the links relaxed and checks only where it ends: the
  // descriptor (queue c, ordinal k) names one chunk, and its acquire orders
  // that chunk's publication before the caller's use. A walk through a chunk
  // recycled under it (or from a hint to one) ends at a wrong chunk (a link
  // is a chunk index or no_chunk in every life, and the walk takes exactly
  // the links from its start's ordinal to k) and starts again, from the
  // pointer. Checking the descriptor before and after each link, as before,
  // cost three acquire loads per link; the walks were half of P-VL's free
  // samples (ncu, H200). Hints: a burst of puts or takes starts hundreds of
  // chunks ahead of the pointer, and an SM's come in about the order of
  // their positions, so its last find is a few links short of its next one.
  // Only walks of more than one link read or write a hint (C-VL's shallow
  // queues: 16 B allocations 1.53 -> 1.62 ms with every walk using them).
  GPUALLOC_HD __attribute__((noinline)) static std::uint32_t locate(heap h, unsigned c, end e, std::uint64_t k) {
    queue_control& q = h.queue(c);
    detail::device_atomic<std::uint64_t> start(e == back_end ? q.list_back : q.list_front);
    detail::backoff b;
    for (bool first = true;; b.pause(), first = false) {
      std::uint64_t p = start.load(detail::acquire);
      if (p == none) continue;
      const bool long_walk = first && links_to(k, p) > 1 && links_to(k, p) <= h.L.chunks;
      if (long_walk) p = nearer_start(h, c, e, k, p);
      if (links_to(k, p) > h.L.chunks) continue;
      auto x = static_cast<std::uint32_t>(p);
      std::uint32_t links = links_to(k, p);
      while (links != 0 && x < h.L.chunks) {
        const std::uint32_t nx = detail::device_atomic<std::uint32_t>(next(h, x)).load(detail::relaxed);
        if (nx != no_chunk) {
          x = nx;
          --links;
        } else if (h.load_desc(x) == descriptor::make(descriptor::queue, c, k - links)) {
          b.pause();  // the put that links chunk k - links on to the next one has not done it yet
        } else {
          break;  // a stale path
        }
      }
      if (links == 0 && x < h.L.chunks && h.load_desc(x) == descriptor::make(descriptor::queue, c, k)) {
        if (long_walk) remember(h, c, e, k, x);
        return x;
      }
    }
  }
  // Links from list pointer p to ordinal k. Ordinals in a pointer are 32
  // bits and wrap: a pointer past k (moved on after a recycle under us)
  // gives more links than the heap has chunks.
  GPUALLOC_HD static std::uint32_t links_to(std::uint64_t k, std::uint64_t p) {
    return static_cast<std::uint32_t>(k) - static_cast<std::uint32_t>(p >> 32);
  }
  // Where a long walk to ordinal k starts: list pointer p, or this SM's
  // hint if that is nearer. Out of line, as is remember: inlined, the hints
  // put P-VL's allocating kernels 8 registers over their folded build
  // (wrapper/register-parity.test).
  GPUALLOC_HD __attribute__((noinline)) static std::uint64_t nearer_start(heap h, unsigned c, end e, std::uint64_t k,
                                                                          std::uint64_t p) {
    const std::uint64_t hinted = detail::device_atomic<std::uint64_t>(hint(h, c, e)).load(detail::relaxed);
    return hinted != none && links_to(k, hinted) < links_to(k, p) ? hinted : p;
  }
  // A long walk found chunk x of ordinal k: this SM's hint moves on to it,
  // unless it names k or a later ordinal already (signed: a hint any
  // distance behind moves on).
  GPUALLOC_HD __attribute__((noinline)) static void remember(heap h, unsigned c, end e, std::uint64_t k,
                                                             std::uint32_t x) {
    auto at = detail::device_atomic<std::uint64_t>(hint(h, c, e));
    const std::uint64_t hinted = at.load(detail::relaxed);
    if (hinted == none || static_cast<std::int32_t>(links_to(k, hinted)) > 0) at.store(pointer(k, x), detail::relaxed);
  }

  // Algorithm 6: chunk x (ordinal k) is done (every put, or every take):
  // move the pointer from it to its successor, and on while those are done too.
  // Its link to the successor was set by the put at chunk k - 1's first
  // position (extend), before that put was counted, and so before the
  // pointer could reach chunk k: the link is read only once the pointer is
  // seen there (a pointer not there yet will be moved on by whoever brings
  // it: the counts and pointer accesses are sequentially consistent).
  template <class Entry>
  GPUALLOC_HD __attribute__((noinline)) static void advance(heap h, std::uint64_t& ptr, std::uint32_t x,
                                                            std::uint64_t k, std::uint64_t one) {
    detail::device_atomic<std::uint64_t> p(ptr);
    std::uint64_t cur = pointer(k, x);
    if (p.load(cuda::memory_order_seq_cst) != cur) return;
    for (;;) {
      const std::uint32_t nx = detail::device_atomic<std::uint32_t>(next(h, x)).load(detail::acquire);
      const std::uint64_t to = pointer(k + 1, nx);
      if (!p.compare_exchange_strong(cur, to, cuda::memory_order_seq_cst, cuda::memory_order_seq_cst)) return;
      const std::uint64_t n = detail::device_atomic<std::uint64_t>(counts(h, nx)).load(cuda::memory_order_seq_cst);
      if (count_of(n, one) != spots<Entry>) return;
      x = nx;
      ++k;
      cur = to;
    }
  }

  // Recycles chunks from the oldest on while the front and the back are both
  // more than `lag` chunks ahead (Q2; the back may be behind the oldest).
  GPUALLOC_HD __attribute__((noinline)) static void recycle_old(heap h, queue_control& q) {
    detail::device_atomic<std::uint64_t> old(q.list_old);
    for (;;) {
      std::uint64_t o = old.load(detail::acquire);
      const std::uint64_t f = detail::device_atomic<std::uint64_t>(q.list_front).load(detail::acquire);
      const std::uint64_t b = detail::device_atomic<std::uint64_t>(q.list_back).load(detail::acquire);
      const auto ahead = [o](std::uint64_t p) {  // ordinals are 32 bits and wrap
        return static_cast<std::int32_t>(static_cast<std::uint32_t>(p >> 32) - static_cast<std::uint32_t>(o >> 32));
      };
      if (ahead(f) <= static_cast<std::int32_t>(lag) || ahead(b) <= static_cast<std::int32_t>(lag)) return;
      const auto x = static_cast<std::uint32_t>(o);
      const std::uint32_t nx = detail::device_atomic<std::uint32_t>(next(h, x)).load(detail::acquire);
      if (old.compare_exchange_strong(o, pointer((o >> 32) + 1, nx), detail::acq_rel, detail::relaxed))
        chunk_pool::give_from_queue(h, x);
    }
  }
};

}  // namespace gpualloc::strategies::ouro
