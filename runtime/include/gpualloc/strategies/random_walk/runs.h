// RW_malloc: runs of n consecutive free units (Pham et al., section IV-C,
// Algorithm 4), and the sweep this project adds for requests that random
// regions cannot serve.
//
// A round of Algorithm 4 reads a region of 32 consecutive bitmap words at a
// random place (a word per lane of a warp in the paper), collects its free
// segments, joined across word boundaries, and each lane claims a segment
// that can hold its n units. The paper keeps the segments in shared memory
// (K) and marks those taken; a drop-in allocator cannot reserve shared
// memory in the program's kernels, so here every lane of the group reads
// the same region words (one broadcast load per word) and walks the same
// segments itself, and the lanes stay apart by their rank: each passes over
// the units the lanes ranked before it need (an exclusive sum, computed once
// per group) before it takes its own place. A claim that still meets
// another (unit_bitmap.h U1) tries again in a fresh region, alone.
//
// Requests the paper cannot serve (n larger than a region, or a region
// search that keeps failing on a nearly full heap) are swept: first fit from
// a random word to the bitmap's end, then from its start through the whole
// bitmap, segments joined across regions; a claim that loses a race scans on
// past the word where it began. A sweep that finds nothing opens a dry
// window (random_walk.h R4).
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/random.h"
#include "gpualloc/detail/unit_bitmap.h"

namespace gpualloc::random_walk_parts {

inline constexpr std::uint64_t region_words = 32;  // a warp's region: a word per lane
inline constexpr std::uint64_t region_units = region_words * detail::unit_bitmap::word_bits;

// The first word of a random region. Regions are aligned: the paper starts
// them at any word, but then runs are placed where each scan began, at
// random in free space, with gaps between them too small for the next (as
// cars parked at random: 9000 B blocks filled 79 % of a free host-test
// heap). Aligned, a run is placed at a region's start or right after a used
// unit, and only the last gap before the next region's start is lost (95 %).
GPUALLOC_INLINE std::uint64_t random_region(const detail::unit_bitmap& bm, detail::walk_random& rng) {
  return rng.below((bm.words + region_words - 1) / region_words) * region_words;
}

// A round of Algorithm 4 in the region starting at word `from`: n units
// after passing over `skip` free ones, claimed; no_unit if none could be.
//
// A region whose first word is free is most likely free throughout (a fresh
// heap): the lane first claims the place the lanes' runs one after another
// give it, and walks the segments only if that place is taken. The walk is
// what costs (each lane passes over the units of every lane before it, bit
// run by bit run: 8 KiB requests of a full warp were 10x `atomic`).
GPUALLOC_INLINE std::uint64_t claim_in_region(const detail::unit_bitmap& bm, std::uint64_t from, std::uint64_t n,
                                              std::uint64_t skip) {
  const std::uint64_t guess = from * detail::unit_bitmap::word_bits + skip;
  if (skip + n <= region_units && from + region_words <= bm.words && bm.read(from) == 0 && bm.claim_run(guess, n))
    return guess;
  const std::uint64_t at = bm.find_run(from, region_words, n, skip);
  return at != detail::unit_bitmap::none && bm.claim_run(at, n) ? at : detail::unit_bitmap::none;
}

// The first run of n free units in words [from, from + count) that this lane could claim.
GPUALLOC_INLINE std::uint64_t first_fit(const detail::unit_bitmap& bm, std::uint64_t from, std::uint64_t count, std::uint64_t n) {
  while (count != 0) {
    const std::uint64_t at = bm.find_run(from, count, n, 0);
    if (at == detail::unit_bitmap::none || bm.claim_run(at, n)) return at;
    const std::uint64_t passed = at / detail::unit_bitmap::word_bits - from + 1;  // lost a race: on past the run's first word
    count = passed < count ? count - passed : 0;
    from += passed;
  }
  return detail::unit_bitmap::none;
}

// The sweep: from word `from` to the end, then the whole bitmap from its
// start, so that no run is cut where the sweep began.
GPUALLOC_INLINE std::uint64_t sweep_for_run(const detail::unit_bitmap& bm, std::uint64_t from, std::uint64_t n) {
  const std::uint64_t at = first_fit(bm, from, bm.words - from, n);
  return at != detail::unit_bitmap::none ? at : first_fit(bm, 0, bm.words, n);
}

}  // namespace gpualloc::random_walk_parts
