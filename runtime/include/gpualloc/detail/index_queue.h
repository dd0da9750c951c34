// Index queues (Ouroboros, Winter et al., ICS 2020, section 3.3, Algorithm 1):
// slots holding indices (of pages, of chunks), a deletion marker in every
// empty slot, a front and a back that only grow, and a fill count.
//
//   enqueue: fill += n, pos = back += n,
//            then per index: CAS slot[pos] from the marker to the index, waiting
//            while a slow dequeue has not yet emptied the slot
//   dequeue: fill -= n (refused when fewer than n are in), pos = front += n,
//            then per index: exchange slot[pos] with the marker, waiting while
//            the enqueue that owns pos has not written it yet
//
// The pieces are separate so that a warp can reserve n positions with one
// atomic and let each lane do its own slot, and so that queues whose slots
// live elsewhere (Ouroboros' virtualised queues: slots on chunks) share the
// slot protocol. Positions are 64-bit and never wrap; a ring maps them to
// slots modulo its power-of-two capacity. A user may gate the ends with its
// own counter instead of fill_count (Ouroboros' page queues use their bulk
// semaphore, whose count is the number of indices in the queue).
//
// Memory ordering: put is a release CAS and take an acquire exchange, so
// what the enqueuer wrote before publishing an index (the bytes of a freed
// page, a chunk's descriptor) is visible to the thread that takes it. The
// counters carry no data and are relaxed.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/bits.h"

namespace gpualloc::detail {

template <class Entry>
struct index_slot {
  static constexpr Entry empty = static_cast<Entry>(~Entry{0});  // the deletion marker

  GPUALLOC_HD static void put(Entry& slot, Entry e) {
    device_atomic<Entry> s(slot);
    backoff b;
    for (Entry expected = empty; !s.compare_exchange_weak(expected, e, release, relaxed); expected = empty) b.pause();
  }

  GPUALLOC_HD static Entry take(Entry& slot) {
    device_atomic<Entry> s(slot);
    Entry e = s.exchange(empty, acquire);
    for (backoff b; e == empty; e = s.exchange(empty, acquire)) b.pause();
    return e;
  }

  GPUALLOC_HD static void clear(Entry& slot) { device_atomic<Entry>(slot).store(empty, relaxed); }
};

// Slots that hold one index per life: empty -> the index (index_slot::put)
// -> taken (once_slot::take), never back until the memory they live in is
// cleared for a new life (Ouroboros' virtualised queues: a queue chunk's
// slots are cleared when it is placed and each is put and taken once before
// it is recycled). The take leaves a mark where index_slot::take leaves the
// deletion marker, so a thread can see from the slots alone that the puts
// (all_put) or the takes (all_taken) of others are over, where a count of
// puts or takes would cost every one of them an atomic on one shared address.
// A user that counts its takes itself reads instead (look, read): no mark.
//
// Memory ordering: take, look and read are acquire loads, as index_slot's
// take. The put (a release compare-and-swap) and the taken mark (a release
// store) are what all_put and all_taken acquire: the puts or takes they
// waited for happen before what their caller does next. They read relaxed in
// batches (acquire loads would go out one at a time) and end with one
// acquire fence; ThreadSanitizer does not model fences, so the host build
// reads each slot with acquire instead.
template <class Entry>
struct once_slot {
  static constexpr Entry empty = index_slot<Entry>::empty;
  static constexpr Entry taken = static_cast<Entry>(empty - 1);  // never a valid index

  GPUALLOC_HD static Entry take(Entry& slot) {
    const Entry e = read(slot);
    device_atomic<Entry>(slot).store(taken, release);
    return e;
  }

  // The index, or `empty` if its put has not landed yet.
  GPUALLOC_HD static Entry look(Entry& slot) { return device_atomic<Entry>(slot).load(acquire); }

  // The index, once its put has landed.
  GPUALLOC_HD static Entry read(Entry& slot) {
    Entry e = look(slot);
    for (backoff b; e == empty; e = look(slot)) b.pause();
    return e;
  }

  // Waits until slots[0 .. n) are all taken.
  GPUALLOC_HD static void all_taken(Entry* slots, std::uint64_t n) {
    wait_for_all(slots, n, [](Entry v) { return v == taken; });
  }

  // Waits until slots[0 .. n) have all been put (they hold an index or the taken mark).
  GPUALLOC_HD static void all_put(Entry* slots, std::uint64_t n) {
    wait_for_all(slots, n, [](Entry v) { return v != empty; });
  }

 private:
  static constexpr unsigned batch = 16;  // loads in flight at once
  static constexpr auto scan_order = device_or_host(relaxed, acquire);

  // The slots' states go into a bit mask, not an array: an array indexed
  // by the count of done slots lived in local memory, and its stores held a
  // third of P-VA's allocation samples (ncu, H200); 2^20 takes of 16 B
  // pages 0.200 -> 0.188 ms without it.
  template <class Done>
  GPUALLOC_HD static void wait_for_all(Entry* slots, std::uint64_t n, Done done_with) {
    backoff b;
    for (std::uint64_t i = 0; i < n;) {
      std::uint64_t done_bits = 0;  // bit j: slot i + j is done (or past n)
#pragma unroll
      for (unsigned j = 0; j < batch; ++j)
        if (i + j >= n || done_with(device_atomic<Entry>(slots[i + j]).load(scan_order))) done_bits |= 1u << j;
      const std::uint32_t done = lowest_bit(~done_bits);  // slots done in a row from i
      if (done < batch) b.pause();                          // slot i + done is not: look again from it
      i += done;
    }
    acquire_fence_on_device();
  }
};

// The two ends of a queue, on separate cache lines.
struct queue_ends {
  alignas(128) std::uint64_t front;  // positions below it have been (or are being) dequeued
  alignas(128) std::uint64_t back;   // positions below it have been (or are being) enqueued

  GPUALLOC_HD std::uint64_t reserve_front(std::uint64_t n) {
    return device_atomic<std::uint64_t>(front).fetch_add(n, relaxed);
  }
  GPUALLOC_HD std::uint64_t reserve_back(std::uint64_t n) {
    return device_atomic<std::uint64_t>(back).fetch_add(n, relaxed);
  }
};

// Algorithm 1's fill count: indices in the queue, counted before they are
// written (enqueue) and before they are read (dequeue). Algorithm 1 also
// refuses an enqueue that would overflow the queue; users here reserve
// their slots in advance instead, so an enqueue only counts.
struct fill_count {
  std::int64_t value;

  GPUALLOC_HD void add(std::int64_t n) { device_atomic<std::int64_t>(value).fetch_add(n, relaxed); }

  // Counts n out; false (nothing counted) if fewer are in.
  GPUALLOC_HD bool try_take(std::int64_t n) { return try_take_counted(device_atomic<std::int64_t>(value), n); }
};

// Slots in a ring of 2^bits entries.
template <class Entry>
struct index_ring {
  Entry* slots;
  std::uint64_t mask;  // capacity - 1

  GPUALLOC_HD Entry& at(std::uint64_t pos) const { return slots[pos & mask]; }
};

}  // namespace gpualloc::detail
