// The bulk semaphore of Ouroboros (Winter, Mlakar, Parger, Steinberger,
// ICS 2020, section 3.4, Algorithm 2): a counting semaphore over resources
// that arrive in bulk (the pages of a new chunk), which also decides which
// waiting thread goes and fetches the next bulk, so that an empty queue gets
// one new chunk per shortfall instead of one per waiting thread.
//
//   count     C   resources available now
//   expected  E   resources a thread has set out to fetch (a chunk being allocated)
//   reserved  R   resources that waiting threads have asked for
//
// wait(n):    take n if C >= n (one fetch-add, the fast path). Otherwise
//             decide on (E, R): add n to R and, if C + E - R < n, the bulks
//             that cover this thread's own shortfall to E, and fetch them.
//             Then sleep until C >= n (take n, then give the reservation
//             back) or R > C + E (the expected bulks will not cover
//             everyone: give it back and decide again).
// signal(n):  C += n (a freed resource).
// signal_expected(n): C += n, E -= n (a fetched bulk arrived).
//
// Four departures from Algorithm 2, measured with 2^20 threads on an H100
// (the first three) and an H200, where a launch brings tens of thousands of
// waiting warps:
//  - The fetcher reserves its own n like every other waiter. In the paper
//    it does not, so its n is not in R, a waiter's reservation can equal
//    C + E while the fetch is under way, and every sleeper sees "R >= C + E",
//    wakes, gives back and reserves again, in a loop: 1.4 billion passes
//    through the decision for 2^20 requests of 4 KiB, 0.56 s a launch
//    (ncu: 90 % of the samples in this loop). Here sleepers wake only on a
//    real shortfall (R > C + E: a fetch that found no memory, or fast-path
//    takers that took what sleepers counted on).
//  - The decision is one fetch-add, not a compare-and-swap loop: every
//    waiter adds its n to R and, provisionally, the bulks that would cover
//    n to E; the old value says whether the supply before it covered n, and
//    it gives back the bulks it does not need. Decided by compare-and-swap,
//    the 32,768 warps of such a launch took turns, 5 ms for 16 B pages.
//    Others may see E too high for the moment between the two adds: they
//    sleep on it and wake when it falls below R.
//  - A decider fetches only its own shortfall (at most ceil(n / per_bulk)
//    bulks), so that after a shortfall every waiter fetches its share in
//    parallel instead of the first one fetching for everybody.
//  - A sleeper that sees C >= n takes n while still reserved and only then
//    gives its reservation back; one that loses the race sleeps on. Giving
//    back first and deciding again after a lost race (the paper's loop) made
//    each of the 22,000 waiting groups of a 16 B launch (Ouroboros-C-S, on
//    an H200) decide ten times, three atomics on `pending` each: ncu put
//    half of the kernel's samples in that loop. The price: between the take
//    and the give-back, others see a shortfall of n that is not there; a
//    sleeper that wakes on it decides again and may fetch a bulk early.
//
// Width: the paper packs C, E and R into one 64-bit word of 21-bit fields,
// which caps a queue at 2^21 resources (32 MiB of 16 B pages). Here C has a
// 64-bit word of its own (heaps of any size) and E, R share a second word.
// The decision step adds to (E, R) and then reads C: a C that changes
// meanwhile only makes a thread fetch a bulk early (C shrank) or rely on
// resources that arrived meanwhile (C grew); no thread is granted a
// resource C did not hold, because every grant is a subtraction from C
// that left it >= 0.
//
// Bulk fetching: the caller's refill(k) tries to fetch k bulks of `per_bulk`
// resources and calls signal_expected(per_bulk) for each one as it arrives
// (before or after publishing them, as its queue allows: a waiter granted a
// resource that is not yet in the queue waits for it there). It returns how
// many it fetched; the rest is taken back out of E. A refill that fetches
// nothing means the heap is out of memory: wait() then grants whatever C
// still holds (fewer than n, maybe 0) instead of sleeping forever.
//
// Waiters: the fast path's fetch-add is undone when it fails, leaving C
// too low for a moment; that is fine once per request, but threads that
// retry in a loop would keep C low for each other, so wait() looks first
// (detail/atomic.h, try_take_counted).
//
// Memory ordering: the counters carry no data (the queue slots do), so every
// access is relaxed, except that a grant (a successful subtraction) is an
// acquire and a signal a release, so that a resource granted is ordered after
// the signal that made it available.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"

namespace gpualloc::detail {

// One cache line: the fast path touches `count` only; `pending` changes in
// the slow path alone.
struct bulk_semaphore {
  alignas(128) std::int64_t count;  // C (for a moment below 0: a failed fast path undoes its subtraction)
  std::uint64_t pending;            // [63:32] expected E, [31:0] reserved R

  static constexpr std::uint64_t expected_one = std::uint64_t{1} << 32;
  static constexpr std::uint64_t reserved_mask = expected_one - 1;

  GPUALLOC_HD std::int64_t available() const {
    return device_atomic<std::int64_t>(const_cast<std::int64_t&>(count)).load(relaxed);
  }

  // The fast path: takes n if C holds them.
  GPUALLOC_HD bool try_wait(std::uint32_t n) {
    device_atomic<std::int64_t> c(count);
    if (c.fetch_sub(n, acquire) >= static_cast<std::int64_t>(n)) return true;
    c.fetch_add(n, relaxed);
    return false;
  }

  // Takes n only if C keeps at least `keep` afterwards; never waits. Looks
  // first and undoes a lost race (try_take_counted): a compare-and-swap
  // loop here retried about 900 times per call against the frees'
  // signals (ncu, 2^20 frees of 16 B pages: 75 % of the samples).
  // With n = 0 a look answers: a free that gives back a wholly freed chunk
  // at the largest sizes asks only whether C keeps `keep`.
  GPUALLOC_HD bool try_reduce(std::uint64_t n, std::int64_t keep = 0) {
    if (n == 0) return device_atomic<std::int64_t>(count).load(acquire) >= keep;
    return try_take_counted(device_atomic<std::int64_t>(count), static_cast<std::int64_t>(n), acquire, keep);
  }

  // Takes min(C, n) and returns it.
  GPUALLOC_HD std::uint64_t take_up_to(std::uint64_t n) {
    device_atomic<std::int64_t> c(count);
    std::int64_t v = c.load(relaxed);
    while (v > 0) {
      const std::int64_t m = v < static_cast<std::int64_t>(n) ? v : static_cast<std::int64_t>(n);
      if (c.compare_exchange_weak(v, v - m, acquire, relaxed)) return static_cast<std::uint64_t>(m);
    }
    return 0;
  }

  GPUALLOC_HD void signal(std::uint64_t n) {
    device_atomic<std::int64_t>(count).fetch_add(static_cast<std::int64_t>(n), release);
  }

  // A bulk of n that was expected arrived.
  GPUALLOC_HD void signal_expected(std::uint64_t n) {
    signal(n);
    device_atomic<std::uint64_t>(pending).fetch_sub(n * expected_one, relaxed);
  }

  // The slow path of wait(n) after try_wait(n) failed: returns n, or fewer
  // (maybe 0) once refill(k) could fetch nothing. Call it out of line.
  template <class Refill>
  GPUALLOC_HD std::uint32_t wait(std::uint32_t n, std::uint32_t per_bulk, Refill&& refill) {
    device_atomic<std::uint64_t> p(pending);
    const auto want = static_cast<std::int64_t>(n);
    const std::uint64_t cover = (n + per_bulk - 1) / per_bulk * per_bulk;  // whole bulks that cover n
    backoff b;
    for (;;) {
      if (try_take_counted(device_atomic<std::int64_t>(count), want, acquire))
        return n;  // not try_wait: see the note on waiters above
      // Decide: reserve n and expect the bulks that cover it in one
      // fetch-add, then give back the bulks the supply before us covered.
      const std::uint64_t pv = p.fetch_add(cover * expected_one + n, relaxed);
      const std::int64_t supply = available() + expected(pv) - reserved(pv);
      const std::int64_t missing = supply >= want ? 0 : supply > 0 ? want - supply : want;
      const std::uint64_t k = (static_cast<std::uint64_t>(missing) + per_bulk - 1) / per_bulk;
      if (k * per_bulk < cover) p.fetch_sub((cover - k * per_bulk) * expected_one, relaxed);
      if (k != 0) {
        const std::uint64_t got = refill(k);
        if (got < k) p.fetch_sub((k - got) * per_bulk * expected_one, relaxed);
        if (got == 0) {
          p.fetch_sub(n, relaxed);
          return static_cast<std::uint32_t>(take_up_to(n));
        }
      }
      // Reserved (n in R): sleep until C holds n (take them, then give the
      // reservation back) or the reservations outgrow the supply (decide again).
      for (;;) {
        const std::uint64_t now = p.load(relaxed);
        const std::int64_t c = available();
        if (c >= want && try_take_counted(device_atomic<std::int64_t>(count), want, acquire)) {
          p.fetch_sub(n, relaxed);
          return n;
        }
        if (reserved(now) > c + expected(now)) break;
        b.pause();
      }
      p.fetch_sub(n, relaxed);
    }
  }

 private:
  GPUALLOC_HD static std::int64_t expected(std::uint64_t pv) { return static_cast<std::int64_t>(pv >> 32); }
  GPUALLOC_HD static std::int64_t reserved(std::uint64_t pv) { return static_cast<std::int64_t>(pv & reserved_mask); }
};

}  // namespace gpualloc::detail
