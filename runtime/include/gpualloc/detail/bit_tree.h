// A concurrent 64-ary bit tree: a set of indices 0 .. universe-1 kept in
// 64-bit words, every word operation one atomic (the vEB-style tree of
// Gallatin, McCoy & Pandey 2024, section 3.2: nodes of one word, no min/max,
// a height fixed by the universe).
//
//   level 0        the root, one word: bit b says child word b of level 1 is non-empty
//   level l        word w, bit b: word 64 w + b of level l+1 is non-empty
//   level L-1      the leaves: bit b of word w says index 64 w + b is in the set
//
// The words of all levels lie in one array (root first); bit_tree_layout says
// where each level starts. It is a pure function of the universe, computed on
// the host when a heap is laid out.
//
// Invariant (summary): outside a running operation, a word's bit in its
// parent is set exactly when the word is non-empty. An operation that empties
// a word clears the word's bit in its parent, then looks at the word again and
// sets the bit back if an insert refilled it meanwhile (mark_empty); an
// operation that fills an empty word sets the bit (mark_nonempty). A search
// that follows a set bit into an empty word (a summary an operation is still
// fixing) skips that word's range and goes on: it may miss an index inserted
// concurrently with it, never one that was in the set all along.
//
// Memory ordering: every read-modify-write is acq_rel, and mark_empty's
// reread is acquire. That orders "empty a word, clear its bit in the parent,
// reread the word" against "fill the word, set its bit", so one of the two
// sees the other; and an index taken out of the set (remove, claim_*) is
// ordered after the insert that put it there, which hands over whatever the
// index stands for. A search only picks candidates, so it reads relaxed
// (peek): the fetch-and that takes an index acquires. (Acquire loads put an
// L1 invalidation on every step of a search: Ouroboros-C-S's 2^20 warm
// allocations of 4 KiB pages, ncu on an H200, spent 20 % of their samples
// on the invalidations of the chunk pool's searches.)
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/bits.h"

namespace gpualloc::detail {

struct bit_tree_layout {
  static constexpr std::uint32_t max_levels = 5;  // 64^5 = 2^30 indices

  std::uint32_t universe;
  std::uint32_t levels;
  std::uint32_t first_word[max_levels];  // where each level starts in the array
  std::uint32_t bits[max_levels];        // valid bits of each level: indices (leaves) or words of the level below
  std::uint32_t words;                   // length of the array

  GPUALLOC_HD static bit_tree_layout make(std::uint32_t universe) {
    bit_tree_layout L{};
    L.universe = universe;
    L.levels = 1;
    for (std::uint64_t reach = 64; reach < universe && L.levels < max_levels; reach *= 64) ++L.levels;
    L.bits[L.levels - 1] = universe;
    for (std::uint32_t l = L.levels - 1; l > 0; --l) L.bits[l - 1] = (L.bits[l] + 63) / 64;
    for (std::uint32_t l = 0; l < L.levels; ++l) {
      L.first_word[l] = L.words;
      L.words += l == 0 ? 1 : (L.bits[l] + 63) / 64;
    }
    return L;
  }

  // The value word `word` of the array has in a tree holding every index
  // (full) or none, for initialising the array in parallel.
  GPUALLOC_HD std::uint64_t initial_word(std::uint32_t word, bool full) const {
    if (!full) return 0;
    std::uint32_t l = levels - 1;
    while (first_word[l] > word) --l;
    const std::uint32_t first_bit = (word - first_word[l]) * 64;
    return first_bit >= bits[l] ? 0 : low_bits(bits[l] - first_bit < 64 ? bits[l] - first_bit : 64);
  }
};

class bit_tree {
 public:
  static constexpr std::uint32_t none = ~0u;

  GPUALLOC_HD bit_tree(std::uint64_t* words, const bit_tree_layout& layout) : words_(words), L_(layout) {}

  GPUALLOC_HD void insert(std::uint32_t i) const { insert_bits(i / 64, std::uint64_t{1} << (i % 64)); }

  // Takes i out of the set; false if it was not in it.
  GPUALLOC_HD bool remove(std::uint32_t i) const {
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    return (remove_bits(i / 64, bit) & bit) != 0;
  }

  // The smallest index >= from in the set, or none (successor search).
  GPUALLOC_HD std::uint32_t next(std::uint32_t from) const {
    std::uint64_t leaf;
    return next(from, leaf);
  }
  // The same, and the leaf word that holds it as the search read it.
  GPUALLOC_HD std::uint32_t next(std::uint32_t from, std::uint64_t& leaf) const {
    const std::uint32_t leaves = L_.levels - 1;
    while (from < L_.universe) {
      // Up: the first set bit at or after x in its word, one level higher each time the word has none.
      std::uint32_t level = leaves;
      std::uint32_t x = from;  // a bit position at `level`
      for (;;) {
        const std::uint64_t word_read = peek(level, x / 64);
        const std::uint64_t v = word_read & (~std::uint64_t{0} << (x % 64));
        if (v != 0) {
          x = x / 64 * 64 + lowest_bit(v);
          leaf = word_read;
          break;
        }
        if (level == 0) return none;
        x = x / 64 + 1;
        --level;
        if (x >= L_.bits[level]) return none;
      }
      // Down: the lowest set bit of each word below.
      bool stale = false;
      while (level < leaves && !stale) {
        ++level;
        const std::uint64_t v = peek(level, x);
        stale = v == 0;  // a summary still being fixed: skip this word's range
        if (!stale) x = x * 64 + lowest_bit(v);
        leaf = v;
      }
      if (!stale) return x;
      std::uint64_t span = 64;  // indices under one word of `level`
      for (std::uint32_t l = level; l < leaves; ++l) span *= 64;
      if ((x + 1) * span >= L_.universe) return none;
      from = static_cast<std::uint32_t>((x + 1) * span);
    }
    return none;
  }

  // Takes the smallest index out of the set and returns it, or none.
  GPUALLOC_HD std::uint32_t claim_first() const {
    for (std::uint32_t from = 0;;) {
      const std::uint32_t i = next(from);
      if (i == none || remove(i)) return i;
      from = i;
    }
  }

  // Takes an aligned run of 2^k indices (k <= 6: its first a multiple of
  // 2^k, the run inside one leaf word) out of the set, from the first word
  // in or after start's that has one, else from the lowest of all; its
  // first index, or none when the set holds no such run (k = 0: one index)
  // or `words` leaf words with free indices held none.
  // Of a word's runs it takes the (salt mod their number)-th, so claimers
  // that meet in one word (having started from different words, or from
  // the same one) take different runs. One fetch-and takes the whole run; a
  // collision (a bit of it taken meanwhile) gives back what it took and
  // looks again at once, as claim_first does: as with claim_last_run, a
  // collision means another claim got its bits, so the claim is lock-free.
  // The runs come from the leaf word as the search read it, not from a
  // second load of it (one round trip to L2 fewer per claim; sm-slab, H200,
  // 2^20 requests on 16 GiB, medians of 7 over two rounds: 4 KiB 2.85x ->
  // 2.77x `atomic`, 8 KiB 3.03x -> 2.96x, the other points 0-5 %
  // faster). Inline: sm_slab's get, its caller, is out of line already, and a
  // second out-of-line level put a kernel that allocates in a loop
  // (examples/divisors.cu) 8 registers over its folded build (4 inline).
  GPUALLOC_HD std::uint32_t claim_aligned_from(std::uint32_t start, std::uint32_t k, std::uint32_t salt,
                                                std::uint32_t words = ~0u) const {
    const std::uint32_t n = 1u << k;
    if (start >= L_.universe) start = 0;
    for (std::uint32_t from = start / 64 * 64;;) {
      std::uint64_t leaf;  // the word of i as the search read it: a fetch-and below checks it anyway
      const std::uint32_t i = next(from, leaf);
      if (i == none) {
        if (from == 0 || start == 0) return none;
        from = start = 0;  // wrap around once
        continue;
      }
      const std::uint32_t w = i / 64;
      const std::uint64_t runs = aligned_runs(leaf, n);
      if (runs == 0) {
        if (--words == 0) return none;
        from = (w + 1) * 64;
        continue;
      }
      const std::uint32_t first = nth_set_bit(runs, salt % popcount(runs));
      const std::uint64_t mask = low_bits(n) << first;
      const std::uint64_t old = remove_bits(w, mask);
      if ((old & mask) == mask) return w * 64 + first;
      if ((old & mask) != 0) insert_bits(w, old & mask);
      from = w * 64;
    }
  }

  // Takes the highest run of `count` consecutive indices out of the set and
  // returns its first index, or none when the set holds no such run. A claim
  // that collides with another thread's gives back what it took and searches
  // again, for as long as a run is found: a fixed number of tries made
  // Ouroboros return NULL from a heap five-sixths free when a few thousand
  // threads wanted runs at once. Lock-free: claim_range takes a run's words
  // from the top, so the claimer of a run's top word is the only one that
  // can complete it, and a collision means some other claim got further.
  GPUALLOC_HD std::uint32_t claim_last_run(std::uint32_t count) const {
    if (count == 0 || count > L_.universe) return none;
    backoff wait;
    for (;;) {
      const std::uint32_t first = find_last_run(count);
      if (first == none || claim_range(first, count)) return first;
      wait.pause();
    }
  }

  // About how many indices the set holds, judged by leaf words w1 and w2
  // (below leaf_words(); two relaxed loads): their mean count as if every
  // leaf word held as many. A hint, for callers that pick the words at
  // random: a search's own neighbourhood would tell of its own claims.
  GPUALLOC_HD std::uint64_t estimate_size(std::uint32_t w1, std::uint32_t w2) const {
    const std::uint32_t leaves = L_.levels - 1;
    return std::uint64_t{popcount(peek(leaves, w1)) + popcount(peek(leaves, w2))} * leaf_words() / 2;
  }
  GPUALLOC_HD std::uint32_t leaf_words() const { return (L_.universe + 63) / 64; }

  // Whether the set looks empty (its root is): a hint, as a search is: an
  // operation fixing a summary may show the set empty for a moment.
  GPUALLOC_HD bool looks_empty() const { return peek(0, 0) == 0; }

  // Puts first .. first+count-1 (all absent) back into the set.
  GPUALLOC_HD void insert_run(std::uint32_t first, std::uint32_t count) const {
    const std::uint32_t end = first + count;
    for (std::uint32_t w = first / 64; w * 64 < end; ++w) insert_bits(w, range_mask(w, first, end));
  }

 private:
  GPUALLOC_HD device_atomic<std::uint64_t> word(std::uint32_t level, std::uint32_t w) const {
    return device_atomic<std::uint64_t>(words_[L_.first_word[level] + w]);
  }
  GPUALLOC_HD std::uint64_t load(std::uint32_t level, std::uint32_t w) const { return word(level, w).load(acquire); }
  GPUALLOC_HD std::uint64_t peek(std::uint32_t level, std::uint32_t w) const { return word(level, w).load(relaxed); }

  // Bits of leaf word w that lie in [first, end).
  GPUALLOC_HD static std::uint64_t range_mask(std::uint32_t w, std::uint32_t first, std::uint32_t end) {
    const std::uint32_t lo = first > w * 64 ? first - w * 64 : 0;
    const std::uint32_t hi = end < w * 64 + 64 ? end - w * 64 : 64;
    return low_bits(hi) & ~low_bits(lo);
  }

  // Bit b of v's aligned runs of n (a power of two <= 64): bits b .. b+n-1
  // of v all set, b a multiple of n. Single bits return at once: the mask
  // below is a 64-bit division, a call of some seventy instructions (ncu,
  // sm_90), which every refill of a class of one segment made. (Without
  // the division, by shifts or immediates, ptxas gave examples/divisors'
  // allocating kernel 130-134 registers instead of 128, past two blocks of
  // 256 threads per SM.)
  GPUALLOC_HD static std::uint64_t aligned_runs(std::uint64_t v, std::uint32_t n) {
    if (n == 1) return v;
    for (std::uint32_t s = 1; s < n; s <<= 1) v &= v >> s;
    return v & (~std::uint64_t{0} / low_bits(n));  // one bit every n: 0x5555.. for 2, 1 for 64
  }

  GPUALLOC_HD void insert_bits(std::uint32_t leaf, std::uint64_t mask) const {
    if (word(L_.levels - 1, leaf).fetch_or(mask, acq_rel) == 0) mark_nonempty(L_.levels - 1, leaf);
  }

  // Clears `mask` in leaf word `leaf`; returns the word as it was.
  GPUALLOC_HD std::uint64_t remove_bits(std::uint32_t leaf, std::uint64_t mask) const {
    const std::uint64_t old = word(L_.levels - 1, leaf).fetch_and(~mask, acq_rel);
    if ((old & mask) != 0 && (old & ~mask) == 0) mark_empty(L_.levels - 1, leaf);
    return old;
  }

  // Word w of `level` became non-empty: set its bit upward while parents were empty.
  GPUALLOC_HD void mark_nonempty(std::uint32_t level, std::uint32_t w) const {
    for (; level > 0; --level, w /= 64)
      if (word(level - 1, w / 64).fetch_or(std::uint64_t{1} << (w % 64), acq_rel) != 0) return;
  }

  // Word w of `level` became empty: clear its bit upward while parents become
  // empty; a word found refilled after its bit was cleared gets it back.
  GPUALLOC_HD void mark_empty(std::uint32_t level, std::uint32_t w) const {
    for (; level > 0; --level, w /= 64) {
      const std::uint64_t bit = std::uint64_t{1} << (w % 64);
      const std::uint64_t old = word(level - 1, w / 64).fetch_and(~bit, acq_rel);
      if (load(level, w) != 0) {
        mark_nonempty(level, w);
        return;
      }
      if ((old & bit) == 0 || (old & ~bit) != 0) return;
    }
  }

  // The first index of the highest run of `count` set indices, or none.
  GPUALLOC_HD std::uint32_t find_last_run(std::uint32_t count) const {
    const std::uint32_t leaves = L_.levels - 1;
    std::uint32_t top = L_.universe, p = top;  // every index in [p, top) is set
    std::uint32_t loaded = none;
    std::uint64_t v = 0;
    while (p > 0) {
      const std::uint32_t w = (p - 1) / 64, base = w * 64;
      if (w != loaded) {
        v = peek(leaves, w);
        loaded = w;
      }
      const std::uint32_t below = p - base;  // bits 0 .. below-1 lie under p
      const std::uint64_t zeros = ~v & low_bits(below);
      const std::uint32_t ones = zeros == 0 ? below : below - 1 - highest_bit(zeros);
      p -= ones;
      if (top - p >= count) return top - count;
      if (zeros == 0) continue;                               // the run goes on into the word below
      const std::uint64_t rest = v & low_bits(p - 1 - base);  // set bits under the gap
      top = p = rest == 0 ? base : base + highest_bit(rest) + 1;
    }
    return none;
  }

  // Takes [first, first+count) word by word from the top; on a collision gives
  // back what it took and says false.
  GPUALLOC_HD bool claim_range(std::uint32_t first, std::uint32_t count) const {
    const std::uint32_t end = first + count, top_word = (end - 1) / 64;
    for (std::uint32_t w = top_word;; --w) {
      const std::uint64_t mask = range_mask(w, first, end);
      const std::uint64_t old = remove_bits(w, mask);
      if ((old & mask) != mask) {
        if ((old & mask) != 0) insert_bits(w, old & mask);
        for (std::uint32_t u = w + 1; u <= top_word; ++u) insert_bits(u, range_mask(u, first, end));
        return false;
      }
      if (w == first / 64) return true;
    }
  }

  std::uint64_t* words_;
  const bit_tree_layout& L_;
};

}  // namespace gpualloc::detail
