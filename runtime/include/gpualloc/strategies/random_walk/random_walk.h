// The random walk of Pham, Li, Yuan, Mou, Ramachandran, Xu and Tu
// ("Dynamic Buffer Management in Massively Parallel Systems: A Case on
// GPUs", ICDE 2022): no global queue or counter; the heap is a pool of
// equal units (layout.h) with a used bit each, and threads find free ones by
// random probing with a random state of their own. One template, the
// family's four strategies as choices of walks.h:
//   rw      probe::unit, sharing::lane, first::random         (Algorithm 1)
//   rw-bm   probe::word, sharing::lane, first::random         (Algorithm 2)
//   corw    probe::word, sharing::warp, first::random         (Algorithm 3)
//   crw     probe::unit, sharing::lane, first::next_to_last   (Algorithm 5)
//
// malloc(bytes), by route:
//   small (< a unit): the group's small requests are packed one after
//     another into one run of consecutive units, claimed once by the leader
//     (section IV-C's aggregation; run_tags.h records the shared run);
//   page (exactly a unit): GETPAGE, the strategy's walk (walks.h);
//   run (more than a unit): RW_malloc (runs.h), the group's lanes through one
//     region first, then alone;
// CRW tries the units right after the thread's last claim before any walk,
// for pages and runs alike. A lane whose walk gives up sweeps (R4).
// free(p): the tag of p's unit names its run; the run's bits are cleared
// when its last block is freed (a run of one block at once). The paper's
// free only clears the used bit: its pages hold one object each.
//
// Invariants:
//  R1 unit_bitmap.h U1: a unit is its claimer's until the claimer (or the
//     last free of the blocks in it) clears its bit.
//  R2 run_tags.h T1: a live block's tags are as its claim wrote them.
//  R3 A lane that walks, rounds or sweeps does so alone after its group's
//     last group operation, except the pooled walk, whose rounds the group
//     runs together (walks.h), and a small run's leader, whose claim comes
//     before its group's broadcast (as in gallatin.h).
//  R4 Bounded search. A walk gives up after max_walk_steps probes (after
//     dry_walk_steps in a dry window) and RW_malloc after max_region_rounds
//     regions; the lane then sweeps the whole bitmap (runs.h), and returns
//     NULL only if the sweep found no room. A sweep for n units that finds
//     none opens a dry window (layout.h controls) for n units and more,
//     eight times as long as the sweep took: such requests give up after
//     their short walk and do not sweep, until a free closes every window.
//     Without it, every lane of a program that overfills the heap sweeps the
//     whole bitmap before its NULL. A sweep announces itself (controls::dry)
//     before it scans, so a free during the sweep closes the window it
//     would open; a free whose load of the announcement is not yet ordered
//     after it (no fence on the free path) can still miss it, and requests
//     of that size may then see NULL for the window's length although that
//     free made room (found by a CPU probe; not seen on a GPU).
//  R5 Runs larger than a region (which the paper does not serve) are next
//     fit: their sweep starts where the last one ended (controls::next_fit).
//     From a random word instead, 16 MiB blocks filled 82 % of a 20 GiB
//     heap (host test): each left a gap behind it too small for the next.
//
// Memory ordering: unit_bitmap.h (claims acquire, clears release) and
// run_tags.h. The leader of a small run writes the run's head tag before
// sync(), after which each lane writes its own link.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/detail/clock.h"
#include "gpualloc/detail/random.h"
#include "gpualloc/detail/unit_bitmap.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"
#include "gpualloc/strategies/random_walk/layout.h"
#include "gpualloc/strategies/random_walk/run_tags.h"
#include "gpualloc/strategies/random_walk/runs.h"
#include "gpualloc/strategies/random_walk/walks.h"
#include "gpualloc/strategy.h"

namespace gpualloc::strategies {

template <random_walk_parts::probe Probe, random_walk_parts::sharing Sharing, random_walk_parts::first First>
struct random_walk {
  static_assert(Sharing == random_walk_parts::sharing::lane || Probe == random_walk_parts::probe::word,
                "lanes pool the clear bits of bitmap words (CoRW)");

  struct state {
    random_walk_parts::layout L;
  };

  static constexpr int init_phases = 1;
  static constexpr std::uint32_t max_walk_steps = 4096;
  static constexpr std::uint32_t dry_walk_steps = 32;
  static constexpr std::uint32_t max_region_rounds = 16;

  static void plan(state& s, const arena& a, const device_facts& facts) {
    s.L = random_walk_parts::layout::make(a.bytes, facts.sm_count,
                                          facts.rw_unit_bytes != 0 ? facts.rw_unit_bytes : random_walk_parts::default_unit_bytes);
  }

  GPUALLOC_HD static void init(state& s, const arena& a, int /*phase*/, std::uint64_t thread, std::uint64_t threads) {
    const random_walk_parts::pool P{s.L, a.begin};
    if (s.L.units == 0) return;
    if (thread == 0) {
      P.control() = random_walk_parts::controls{};
      for (std::uint64_t& fewest : P.control().dry_from) fewest = ~std::uint64_t{0};
    }
    P.bitmap().init(s.L.units, thread, threads);
    for (std::uint64_t i = thread; i < s.L.hint_slots; i += threads) P.hints()[i] = no_hint;
  }

  GPUALLOC_HD static void* malloc(state& s, const arena& a, std::uint64_t bytes, const detail::lane_group& group) {
    using namespace random_walk_parts;
    const layout& L = s.L;
    const pool P{L, a.begin};
    const std::uint64_t unit = L.unit_bytes;
    const std::uint64_t n = bytes / unit + (bytes % unit != 0);
    const route r = n > L.units ? route::none : bytes < unit ? route::small : n == 1 ? route::page : route::run;
    const detail::lane_group g = group.partition(static_cast<std::uint64_t>(r));
    detail::walk_random rng = detail::walk_random::seeded();
    switch (r) {
      case route::small: return malloc_small(P, g, bytes, rng);
      case route::page: return malloc_page(P, g, rng);
      case route::run: return malloc_run(P, g, n, rng);
      case route::none: break;
    }
    return nullptr;
  }

  GPUALLOC_HD static void free(state& s, const arena& a, void* p, const detail::lane_group& /*group*/) {
    using namespace random_walk_parts;
    const pool P{s.L, a.begin};
    unit_run run;
    if (!run_tags{P.tags()}.drop(P.unit_of(p), run)) return;
    P.bitmap().release_run(run.first, run.units);
    if (detail::device_atomic<std::uint32_t>(P.control().dry).load(detail::relaxed) != 0) close_dry_windows(P);
  }

 private:
  static constexpr std::uint32_t no_hint = ~0u;
  enum class route : std::uint8_t { small, page, run, none };

  // The group's small requests in one shared run: offsets by exclusive sum,
  // one claim by the leader. If the heap has no such run, the lanes whose
  // blocks start in the same unit of it try again together (a run of one or
  // two units each).
  GPUALLOC_HD static void* malloc_small(const random_walk_parts::pool& P, const detail::lane_group& g, std::uint64_t bytes,
                                        detail::walk_random& rng) {
    std::uint64_t offset;
    if (void* p = pack(P, g, bytes, rng, offset)) return p;
    if (g.size() == 1) return nullptr;
    std::uint64_t again;
    return pack(P, g.partition(offset / P.L.unit_bytes), bytes, rng, again);
  }

  // Packs the blocks of g's lanes one after another into a run it claims;
  // `offset` gets this lane's place in the packing. NULL on every lane if
  // there is no such run.
  GPUALLOC_HD static void* pack(const random_walk_parts::pool& P, const detail::lane_group& g, std::uint64_t bytes,
                                detail::walk_random& rng, std::uint64_t& offset) {
    using namespace random_walk_parts;
    const run_tags tags{P.tags()};
    const std::uint64_t unit = P.L.unit_bytes;
    std::uint64_t total;
    offset = g.exclusive_sum(bytes, total);
    const std::uint64_t units = (total + unit - 1) / unit;
    std::uint64_t head = no_unit;
    if (g.is_leader()) {
      head = claim_alone(P, units, rng);
      if (head != no_unit && g.size() == 1) tags.set_single(head, units);
      if (head != no_unit && g.size() > 1) tags.set_shared(head, units, g.size());
    }
    head = g.broadcast(head);
    g.sync();  // the head's tag is written before any lane hands out its block
    if (head == no_unit) return nullptr;
    const std::uint64_t u = head + offset / unit;
    if (u != head) tags.set_link(u, u - head);
    return P.unit(head) + offset;
  }

  // GETPAGE for every lane of g.
  GPUALLOC_HD static void* malloc_page(const random_walk_parts::pool& P, const detail::lane_group& g, detail::walk_random& rng) {
    using namespace random_walk_parts;
    std::uint64_t u = no_unit;
    if constexpr (Sharing == sharing::warp) {
      const bool dry_now = g.broadcast(dry(P, 1));
      u = walk_pooled(g, P.bitmap(), rng, dry_now ? dry_walk_steps : max_walk_steps).unit;
      g.sync();  // a unit dealt by another lane is ordered after that lane's acquire
      if (u == no_unit && !dry_now) u = sweep(P, 1, rng);
    } else {
      u = claim_alone(P, 1, rng);
    }
    if (u == no_unit) return nullptr;
    run_tags{P.tags()}.set_single(u, 1);
    return P.unit(u);
  }

  // RW_malloc for every lane of g, n units each: one region together, then alone.
  GPUALLOC_HD static void* malloc_run(const random_walk_parts::pool& P, const detail::lane_group& g, std::uint64_t n,
                                      detail::walk_random& rng) {
    using namespace random_walk_parts;
    const detail::unit_bitmap bm = P.bitmap();
    std::uint64_t need_total;
    const std::uint64_t skip = g.exclusive_sum(n, need_total);
    const std::uint64_t from = g.broadcast(random_region(bm, rng));
    std::uint64_t u = after_last(P, n);
    if (u == no_unit && n <= region_units) u = claim_in_region(bm, from, n, skip);
    if (u == no_unit) u = search_alone(P, n, rng);
    if (u == no_unit) return nullptr;
    note_last(P, u, n);
    run_tags{P.tags()}.set_single(u, n);
    return P.unit(u);
  }

  // n units for one lane: after its last (CRW), else search_alone.
  GPUALLOC_HD static std::uint64_t claim_alone(const random_walk_parts::pool& P, std::uint64_t n, detail::walk_random& rng) {
    std::uint64_t u = after_last(P, n);
    if (u == random_walk_parts::no_unit) u = search_alone(P, n, rng);
    if (u != random_walk_parts::no_unit) note_last(P, u, n);
    return u;
  }

  // n units for one lane by the strategy's walk (n == 1; CoRW's pooling with no other lane is RW-BM's
  // walk) or RW_malloc's rounds, then a sweep (R4).
  GPUALLOC_HD static std::uint64_t search_alone(const random_walk_parts::pool& P, std::uint64_t n, detail::walk_random& rng) {
    using namespace random_walk_parts;
    const detail::unit_bitmap bm = P.bitmap();
    const bool dry_now = dry(P, n);
    std::uint64_t u = no_unit;
    if (n == 1) {
      const std::uint32_t steps = dry_now ? dry_walk_steps : max_walk_steps;
      u = Probe == probe::unit ? walk_units(bm, P.L.units, rng, steps).unit : walk_words(bm, rng, steps).unit;
    } else if (n <= region_units) {
      for (std::uint32_t i = dry_now ? max_region_rounds - 2 : 0; u == no_unit && i < max_region_rounds; ++i)
        u = claim_in_region(bm, random_region(bm, rng), n, 0);
    }
    return u != no_unit || dry_now ? u : sweep(P, n, rng);
  }

  // R4: the whole bitmap once; a dry window for n and more if it has no room. R5: next fit above a region.
  __attribute__((noinline)) GPUALLOC_HD static std::uint64_t sweep(const random_walk_parts::pool& P, std::uint64_t n,
                                                                   detail::walk_random& rng) {
    using namespace random_walk_parts;
    const detail::unit_bitmap bm = P.bitmap();
    controls& C = P.control();
    const bool next_fit = n > region_units;
    detail::device_atomic<std::uint64_t> last_end(C.next_fit);
    const std::uint64_t start = detail::now_ns();
    detail::device_atomic<std::uint32_t>(C.dry).store(1, detail::relaxed);  // frees from now on close windows
    cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_device);
    const std::uint32_t closes = detail::device_atomic<std::uint32_t>(C.closes).load(detail::relaxed);
    const std::uint64_t from = next_fit ? last_end.load(detail::relaxed) % bm.words : rng.below(bm.words);
    const std::uint64_t u = sweep_for_run(bm, from, n);
    if (u != no_unit && next_fit) last_end.store((u + n) / detail::unit_bitmap::word_bits, detail::relaxed);
    if (u != no_unit) return u;
    const std::uint64_t end = detail::now_ns();
    const std::uint32_t bucket = detail::highest_bit(n);
    for (std::uint32_t b = bucket; b < dry_buckets; ++b) {
      detail::device_atomic<std::uint64_t>(C.dry_from[b]).fetch_min(b == bucket ? n : 0, detail::relaxed);
      detail::device_atomic<std::uint64_t>(C.dry_until[b]).store(end + 8 * (end - start), detail::relaxed);
    }
    cuda::atomic_thread_fence(cuda::memory_order_seq_cst, cuda::thread_scope_device);
    if (detail::device_atomic<std::uint32_t>(C.closes).load(detail::relaxed) != closes) close_dry_windows(P);
    return no_unit;
  }

  // A free made room: sweeps are worth it again.
  __attribute__((noinline)) GPUALLOC_HD static void close_dry_windows(const random_walk_parts::pool& P) {
    random_walk_parts::controls& C = P.control();
    detail::device_atomic<std::uint32_t>(C.closes).fetch_add(1, detail::relaxed);
    detail::device_atomic<std::uint32_t>(C.dry).store(0, detail::relaxed);
    for (std::uint32_t b = 0; b < random_walk_parts::dry_buckets; ++b) {
      detail::device_atomic<std::uint64_t>(C.dry_until[b]).store(0, detail::relaxed);
      detail::device_atomic<std::uint64_t>(C.dry_from[b]).store(~std::uint64_t{0}, detail::relaxed);
    }
  }

  GPUALLOC_HD static bool dry(const random_walk_parts::pool& P, std::uint64_t n) {
    const std::uint32_t b = detail::highest_bit(n);
    const std::uint64_t until = detail::device_atomic<std::uint64_t>(P.control().dry_until[b]).load(detail::relaxed);
    return until != 0 && detail::now_ns() < until &&
           n >= detail::device_atomic<std::uint64_t>(P.control().dry_from[b]).load(detail::relaxed);
  }

  // CRW (Algorithm 5, for runs too): the n units after this thread's last claim, if it can claim them.
  GPUALLOC_HD static std::uint64_t after_last(const random_walk_parts::pool& P, std::uint64_t n) {
    if constexpr (First != random_walk_parts::first::next_to_last)
      return random_walk_parts::no_unit;
    else
      return claim_after_last(P, n);
  }

  // Out of line: inlined beside the region round, the joined build of divisors' collect kernel took 10
  // registers more than the folded one (register parity); measured the same speed either way.
  __attribute__((noinline)) GPUALLOC_HD static std::uint64_t claim_after_last(const random_walk_parts::pool& P,
                                                                              std::uint64_t n) {
    using namespace random_walk_parts;
    const std::uint32_t slot = last_unit_slot(P.L.hint_slots);
    const std::uint64_t next = detail::device_atomic<std::uint32_t>(P.hints()[slot]).load(detail::relaxed);
    const detail::unit_bitmap bm = P.bitmap();
    if (next == no_hint || next + n > P.L.units || bm.is_used(next)) return no_unit;
    return bm.claim_run(next, n) ? next : no_unit;
  }

  GPUALLOC_HD static void note_last(const random_walk_parts::pool& P, std::uint64_t u, std::uint64_t n) {
    if constexpr (First == random_walk_parts::first::next_to_last)
      detail::device_atomic<std::uint32_t>(P.hints()[random_walk_parts::last_unit_slot(P.L.hint_slots)])
          .store(static_cast<std::uint32_t>(u + n), detail::relaxed);
  }
};

using rw = random_walk<random_walk_parts::probe::unit, random_walk_parts::sharing::lane, random_walk_parts::first::random>;
using rw_bm = random_walk<random_walk_parts::probe::word, random_walk_parts::sharing::lane, random_walk_parts::first::random>;
using corw = random_walk<random_walk_parts::probe::word, random_walk_parts::sharing::warp, random_walk_parts::first::random>;
using crw = random_walk<random_walk_parts::probe::unit, random_walk_parts::sharing::lane, random_walk_parts::first::next_to_last>;

}  // namespace gpualloc::strategies
