// GETPAGE: how a lane finds one free unit by random probing (Pham et al.,
// section III-A and IV). Three orthogonal choices; the family's four
// strategies are four of their combinations (random_walk.h):
//
//   probe     unit: one step reads one unit's used bit and claims it if
//             clear (RW, Algorithm 1);
//             word: one step reads a 32-bit word of the bitmap and, if it
//             has a clear bit, takes the word's lock (the LockMap), claims
//             its lowest clear bit and unlocks (RW-BM, Algorithm 2). The
//             paper locks before it reads; here a full word is not locked
//             (test, then lock), which changes no step count;
//   sharing   lane: each lane walks for itself;
//             warp: the lanes of a group walk together and pool what they
//             find: every lane reads a word per round, a lane that got the
//             word's lock offers all its clear bits, the offers are numbered
//             by an exclusive sum and dealt to the lanes still waiting, in
//             rank order, and each giver claims only the bits that will be
//             dealt (CoRW, Algorithm 3). A lane whose word is locked by
//             another, or full, only receives. Requires probe == word;
//   first     random: the walk starts anywhere;
//             next_to_last: first the unit after this thread's last one, then
//             the walk (CRW, Algorithm 5). The thread's last unit is kept in
//             a slot of the arena per lane of each warp slot (layout.h).
//
// A step is one probe (TAS and WAS count them, section III-B); a CoRW
// round is one step of every lane still waiting. Walks are bounded: a
// lane that has not found a unit after `max_steps` gives up (random_walk.h
// then sweeps, R4), where the paper's loop runs until it finds one.
//
// Warp rule (detail/warp.h): the pooled walk's rounds are a loop of group
// operations whose trip count every lane computes alike (from group sums),
// so the lanes run every round together; the per-lane parts of a round are
// straight-line code, and the walk is called before any lane of the group
// has taken a different path.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/detail/random.h"
#include "gpualloc/detail/unit_bitmap.h"
#include "gpualloc/detail/warp.h"

#if !GPUALLOC_ON_DEVICE
#include <functional>
#include <thread>
#endif

namespace gpualloc::random_walk_parts {

enum class probe : std::uint8_t { unit, word };
enum class sharing : std::uint8_t { lane, warp };
enum class first : std::uint8_t { random, next_to_last };

inline constexpr std::uint64_t no_unit = detail::unit_bitmap::none;

// A walk's outcome for one lane.
struct found_unit {
  std::uint64_t unit = no_unit;
  std::uint32_t steps = 0;
};

// Algorithm 1: up to max_steps probes of single units.
GPUALLOC_INLINE found_unit walk_units(const detail::unit_bitmap& bm, std::uint64_t units, detail::walk_random& rng,
                                      std::uint32_t max_steps) {
  found_unit f;
  while (f.steps < max_steps) {
    ++f.steps;
    const std::uint64_t u = rng.below(units);
    if (!bm.is_used(u) && bm.claim_unit(u)) {
      f.unit = u;
      break;
    }
  }
  return f;
}

// Algorithm 2: up to max_steps probes of bitmap words, each claimed from under its lock.
GPUALLOC_INLINE found_unit walk_words(const detail::unit_bitmap& bm, detail::walk_random& rng, std::uint32_t max_steps) {
  found_unit f;
  while (f.steps < max_steps) {
    ++f.steps;
    const std::uint64_t w = rng.below(bm.words);
    if (bm.read(w) == ~0u || !bm.try_lock(w)) continue;
    const std::uint32_t got = bm.claim_bits(w, static_cast<std::uint32_t>(detail::lowest_set_bits(~bm.read(w) & 0xffffffffull, 1)));
    bm.unlock(w);
    if (got != 0) {
      f.unit = w * 32 + detail::lowest_bit(got);
      break;
    }
  }
  return f;
}

// Algorithm 3: every lane of g wants one unit; up to max_steps rounds.
__attribute__((noinline)) GPUALLOC_INLINE found_unit walk_pooled(const detail::lane_group& g, const detail::unit_bitmap& bm, detail::walk_random& rng,
                                       std::uint32_t max_steps) {
  found_unit f;
  std::uint64_t waiting = g.size();  // the same on every lane
  for (std::uint32_t round = 0; waiting != 0 && round < max_steps; ++round) {
    if (f.unit == no_unit) ++f.steps;
    // Produce: a word this lane holds the lock of, or nothing.
    const std::uint64_t w = rng.below(bm.words);
    std::uint32_t clear = ~bm.read(w);
    bool locked = false;
    if (clear != 0) locked = bm.try_lock(w);
    clear = locked ? ~bm.read(w) : 0u;
    std::uint64_t offered_total;
    const std::uint64_t offered_before = g.exclusive_sum(detail::popcount(clear), offered_total);
    // Give only what the waiting lanes take, the lowest-ranked givers first.
    const std::uint64_t give = offered_before >= waiting ? 0 : waiting - offered_before;
    std::uint32_t got = 0;
    if (give != 0 && clear != 0)
      got = bm.claim_bits(w, static_cast<std::uint32_t>(detail::lowest_set_bits(clear, static_cast<std::uint32_t>(give))));
    if (locked) bm.unlock(w);
    // Deal: units 0 .. dealt-1, numbered in the givers' rank order, to the waiting lanes in theirs.
    std::uint64_t dealt, waiters;
    const std::uint64_t got_before = g.exclusive_sum(detail::popcount(got), dealt);
    const std::uint64_t wait_rank = g.exclusive_sum(f.unit == no_unit ? 1 : 0, waiters);
    const bool receives = f.unit == no_unit && wait_rank < dealt;
    const std::uint64_t ticket = receives ? wait_rank : 0;
    unsigned giver = 0;  // the highest rank whose units start at or before the ticket
    for (unsigned step = 16; step != 0; step /= 2) {
      const unsigned candidate = giver + step;
      const unsigned from = candidate < g.size() ? candidate : g.size() - 1;
      const std::uint64_t starts_at = g.shuffle_from_rank(got_before, from);
      if (candidate < g.size() && starts_at <= ticket) giver = candidate;
    }
    const std::uint64_t giver_before = g.shuffle_from_rank(got_before, giver);
    const std::uint64_t giver_word = g.shuffle_from_rank(w, giver);
    const auto giver_got = static_cast<std::uint32_t>(g.shuffle_from_rank(got, giver));
    if (receives) f.unit = giver_word * 32 + detail::nth_set_bit(giver_got, static_cast<std::uint32_t>(ticket - giver_before));
    waiting -= dealt;
  }
  return f;
}

// The slot of this thread's last unit (CRW), among `slots` (a power of two).
GPUALLOC_INLINE std::uint32_t last_unit_slot(std::uint32_t slots) {
#if GPUALLOC_ON_DEVICE
  std::uint32_t sm, warp, lane;
  asm("mov.u32 %0, %%smid;" : "=r"(sm));
  asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return ((sm * 64 + warp) * 32 + lane) & (slots - 1);
#else
  return static_cast<std::uint32_t>(detail::mix64(std::hash<std::thread::id>{}(std::this_thread::get_id()))) & (slots - 1);
#endif
}

}  // namespace gpualloc::random_walk_parts
