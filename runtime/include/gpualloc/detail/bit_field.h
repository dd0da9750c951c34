// A bit-field of free units in a few 64-bit words (bit set = unit free), as
// Ouroboros keeps one per chunk for its pages (Winter et al., ICS 2020,
// Algorithm 5): a free sets its unit's bit, an allocation clears bits it
// found set, and a fetch-and tells it which of them it really got.
//
// The field does not count: a user that must know a claim will succeed keeps
// a count beside it (Ouroboros' per-chunk page count) and only claims what
// the count granted, looping over the words until it has them all.
//
// Memory ordering: release on set, acquire on claim, so a unit claimed is
// ordered after the free that set its bit (the freer's writes to the unit).
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/bits.h"

namespace gpualloc::detail {

struct bit_field {
  std::uint64_t* words;

  GPUALLOC_HD void set(std::uint32_t unit) const {
    device_atomic<std::uint64_t>(words[unit / 64]).fetch_or(std::uint64_t{1} << (unit % 64), release);
  }

  // Clears up to `want` of the bits set in word w; returns the bits this call cleared.
  GPUALLOC_HD std::uint64_t claim(std::uint32_t w, std::uint32_t want) const {
    device_atomic<std::uint64_t> word(words[w]);
    const std::uint64_t pick = lowest_set_bits(word.load(relaxed), want);
    return pick == 0 ? 0 : word.fetch_and(~pick, acquire) & pick;
  }
};

}  // namespace gpualloc::detail
