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
