// A bitmap of used units in 32-bit words (bit set = unit in use), as the
// random walk of Pham et al. keeps its pages' used bits (ICDE 2022,
// section IV-A), with one lock bit per word (its LockMap) and the
// operations on runs of consecutive units that its RW_malloc needs
// (section IV-C).
//
// Invariant U1: a unit belongs to whoever set its bit, until that owner
// clears it. Every claim is a fetch-or, and a claimer owns exactly the bits
// of its mask that were clear before (`mask & ~old`); a run claimed in
// several words is the claimer's only if every word gave it all its bits,
// else it clears what it got and owns nothing. So no claim relies on what it
// read before: a word may change between the read that chose a unit and the
// claim.
//
// Invariant U2: a word's lock bit only says "someone is drawing units from
// this word": the walks that honour it (RW-BM, CoRW) skip a locked word
// rather than compete for it. U1 holds with or without it.
//
// Units past the end (the last word's tail) are set at init and never
// cleared, so no claim can take them.
//
// Memory ordering: claims acquire, clears release, so a unit's new owner is
// ordered after everything its previous owner did with it. Reads that only
// choose where to claim are relaxed.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/bits.h"

namespace gpualloc::detail {

struct unit_bitmap {
  static constexpr std::uint32_t word_bits = 32;
  static constexpr std::uint64_t none = ~std::uint64_t{0};

  std::uint32_t* used;   // units / 32 words, rounded up
  std::uint32_t* locks;  // one bit per word of `used`
  std::uint64_t words;

  static constexpr std::uint64_t words_for(std::uint64_t units) { return (units + word_bits - 1) / word_bits; }
  static constexpr std::uint64_t lock_words_for(std::uint64_t units) { return words_for(words_for(units)); }

  // Init, thread `thread` of `threads`: every unit free but the tail past `units`; no lock held.
  GPUALLOC_HD void init(std::uint64_t units, std::uint64_t thread, std::uint64_t threads) const {
    for (std::uint64_t w = thread; w < words; w += threads) {
      const std::uint64_t first = w * word_bits;
      used[w] = first + word_bits <= units ? 0u : ~static_cast<std::uint32_t>(low_bits(static_cast<std::uint32_t>(units - first)));
    }
    for (std::uint64_t w = thread; w < words_for(words); w += threads) locks[w] = 0;
  }

  GPUALLOC_HD std::uint32_t read(std::uint64_t w) const { return device_atomic<std::uint32_t>(used[w]).load(relaxed); }

  // Unit u's bit as read now (relaxed: a hint for where to claim).
  GPUALLOC_HD bool is_used(std::uint64_t u) const { return (read(u / word_bits) >> (u % word_bits) & 1u) != 0; }

  // Claims bits `mask` of word w; returns those this call got (U1).
  GPUALLOC_HD std::uint32_t claim_bits(std::uint64_t w, std::uint32_t mask) const {
    return mask & ~device_atomic<std::uint32_t>(used[w]).fetch_or(mask, acquire);
  }

  GPUALLOC_HD bool claim_unit(std::uint64_t u) const {
    return claim_bits(u / word_bits, std::uint32_t{1} << (u % word_bits)) != 0;
  }

  // Claims units [first, first + n): all of them, or none (U1).
  GPUALLOC_HD bool claim_run(std::uint64_t first, std::uint64_t n) const {
    const std::uint64_t end = first + n;
    for (std::uint64_t u = first; u < end;) {
      const std::uint64_t w = u / word_bits;
      const std::uint32_t mask = word_mask(u, end);
      const std::uint32_t got = claim_bits(w, mask);
      if (got != mask) {
        clear_bits(w, got);
        if (u > first) release_run(first, u - first);
        return false;
      }
      u = (w + 1) * word_bits;
    }
    return true;
  }

  GPUALLOC_HD void clear_bits(std::uint64_t w, std::uint32_t mask) const {
    if (mask != 0) device_atomic<std::uint32_t>(used[w]).fetch_and(~mask, release);
  }

  GPUALLOC_HD void release_run(std::uint64_t first, std::uint64_t n) const {
    const std::uint64_t end = first + n;
    for (std::uint64_t u = first; u < end; u = (u / word_bits + 1) * word_bits) clear_bits(u / word_bits, word_mask(u, end));
  }

  // The LockMap (U2): true if this call took word w's lock.
  GPUALLOC_HD bool try_lock(std::uint64_t w) const {
    const std::uint32_t bit = std::uint32_t{1} << (w % word_bits);
    return (device_atomic<std::uint32_t>(locks[w / word_bits]).fetch_or(bit, acquire) & bit) == 0;
  }
  GPUALLOC_HD void unlock(std::uint64_t w) const {
    device_atomic<std::uint32_t>(locks[w / word_bits]).fetch_and(~(std::uint32_t{1} << (w % word_bits)), release);
  }

  // Where a run of n free units starts in words [from, from + count) (taken
  // modulo `words`; a run does not wrap from the last word to the first),
  // or in the clear top bits of the word before, so that a run is placed
  // flush against the used unit before it rather than where the scan began,
  // after passing over `skip` free units that lanes ranked before the caller
  // will take (RW_malloc's free segments, section IV-C): the segments in
  // order, `skip` units consumed from their fronts, the first place with n
  // free units after that. `none` if there is none. Reads each word once,
  // relaxed, and stops at the first place found.
  GPUALLOC_HD std::uint64_t find_run(std::uint64_t from, std::uint64_t count, std::uint64_t n, std::uint64_t skip) const {
    std::uint64_t start = 0, length = 0;  // the open segment: free units up to the current word
    if (from % words != 0) {  // a segment open at `from` may begin after a used unit of the word before
      const std::uint64_t before = (from - 1) % words;
      const std::uint32_t top_free = leading_clear(read(before));
      length = top_free < word_bits ? top_free : 0;
      start = (before + 1) * word_bits - length;
      if (length >= skip + n) return start + skip;
    }
    auto close = [&] {  // the open segment ended too short
      skip = skip > length ? skip - length : 0;  // what lanes before us take of it is gone
      length = 0;
    };
    for (std::uint64_t i = 0; i < count; ++i) {
      const std::uint64_t w = (from + i) % words;
      if (w == 0) close();  // the last word's units do not continue into the first's
      std::uint64_t free = ~static_cast<std::uint64_t>(read(w)) & 0xffffffffull;
      if (free == 0) close();
      while (free != 0) {
        const std::uint32_t a = lowest_bit(free);
        const std::uint32_t b = a + lowest_bit(~(free >> a));  // free units [a, b) of this word
        if (a != 0) close();
        if (length == 0) start = w * word_bits + a;
        length += b - a;
        if (length >= skip + n) return start + skip;
        if (b < word_bits) close();
        free &= ~low_bits(b);
      }
    }
    return none;
  }

 private:
  // Clear bits above the highest set bit of a word.
  GPUALLOC_HD static std::uint32_t leading_clear(std::uint32_t v) { return v == 0 ? word_bits : 31 - highest_bit(v); }

  // Bits of word u / 32 from unit u to min(end, the word's end).
  GPUALLOC_HD static std::uint32_t word_mask(std::uint64_t u, std::uint64_t end) {
    const auto lo = static_cast<std::uint32_t>(u % word_bits);
    const std::uint64_t word_end = (u / word_bits + 1) * word_bits;
    const auto hi = static_cast<std::uint32_t>((end < word_end ? end : word_end) - (u - lo));
    return static_cast<std::uint32_t>(low_bits(hi) & ~low_bits(lo));
  }
};

}  // namespace gpualloc::detail
