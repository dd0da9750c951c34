// Gallatin's segments (McCoy & Pandey 2024, sections 4.1, 4.2, 5): the
// segment tree hands out free segments; a segment formatted into blocks of
// one size 2^j belongs to block tree j while it has free blocks, and keeps
// its free blocks in a ring; runs of whole segments serve the largest
// requests.
//
// Per segment:
//   kind    what its memory is: free, blocks of 2^j bytes, or the first of a
//           run of `count` segments handed out whole. Written before the
//           memory is handed out; free() reads it (relaxed) to find a block.
//   format  [generation:24 | j:8 (0: not formatted)]; a new format, a new generation
//   free    the count of free blocks nobody has claimed (signed; `unformatted`,
//           far below zero, while the segment is not formatted)
//   ring    head, tail and one cell per block: a bounded queue of the free
//           blocks' indices (Vyukov's: cell p mod n holds [sequence:20 |
//           block:12], the sequence p+1 once position p was given back, p+n
//           once it was taken again; modulo 2^20, which n divides).
//
// Invariants
//  S1 A segment is in exactly one place: set in the segment tree (free),
//     formatted (format's j != 0), or handed out as part of a run.
//  S2 A taker reads the format, decrements `free` (one fetch-sub: a burst of
//     takers does not serialise as compare-and-swap retries would), and
//     keeps its claim only if the count was positive and the format is
//     still the one it read; otherwise it adds the 1 back. Such transient
//     decrements never lose a block: every add-back is counted like a
//     give-back (S3, S4). A claim then takes a ring position. A block goes
//     back by ring first, count second. A segment is formatted by adding
//     n-1 to `unformatted` (never by storing), so the late decrements and
//     add-backs of takers that read an older format cancel out.
//  S3 A segment leaves its block tree's set only while it has no free
//     blocks or is no longer formatted for it: whoever moves `free` from
//     above 0 to 0 clears the bit and rereads the count (sync_tree_bit);
//     whoever moves it from 0 or below to above 0 sets it. So no segment with
//     free blocks is lost to its tree. Stale set bits are harmless: a taker
//     fails on them and clears them.
//  S4 Whoever moves `free` to n (all blocks home) reclaims the segment with
//     one compare-and-swap from n to `unformatted`: no take can then
//     succeed, and no block of it is out, so the ring is quiet when the
//     segment goes back to the segment tree and is formatted again.
//  S5 At most one thread formats a segment for tree j at a time (the tree's
//     format flag), so a burst of requests for one size formats one segment,
//     not one each; the others wait (with back-off) and take blocks from it.
//     A segment of a single block skips the flag: its formatter takes it.
//
// Memory ordering: `free`'s read-modify-writes are acq_rel, the format word
// is stored with release before the formatter's add to `free`: a taker is
// ordered after the formatter (ring cells, kind, format) and after the
// thread that gave its block back. Ring cells: acquire loads, release
// stores (the block index and everything its last owner did pass with
// them). Trees: bit_tree.h.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/bit_tree.h"
#include "gpualloc/strategies/gallatin/layout.h"

namespace gpualloc::gallatin_parts {

inline constexpr std::uint32_t kind_free = 0;
inline constexpr std::uint32_t kind_blocks = 1u << 8;  // | j
inline constexpr std::uint32_t kind_run = 1u << 31;    // | segments in the run

inline constexpr std::uint32_t no_block = ~0u;

class segment_table {
 public:
  GPUALLOC_HD segment_table(const layout& L, std::byte* arena) : L_(L), arena_(arena) {}

  GPUALLOC_HD std::byte* data() const { return arena_ + L_.data_offset; }

  GPUALLOC_HD std::uint32_t kind(std::uint32_t seg) const {
    return detail::device_atomic<std::uint32_t>(kinds()[seg]).load(detail::relaxed);
  }

  // A block's index in the counter array (and the ring's entries): segment and position in it.
  GPUALLOC_HD std::uint32_t block_id(std::uint32_t seg, std::uint32_t index) const {
    return seg << L_.entries_log2 | index;
  }
  GPUALLOC_HD block_counters& counters(std::uint32_t block) const {
    return reinterpret_cast<block_counters*>(arena_ + L_.counters_offset)[block];
  }

  // A free block of 2^j bytes: from a segment of block tree j, or from a
  // segment formatted for it now. Returns its block id, or no_block when no
  // segment is left.
  GPUALLOC_HD std::uint32_t get_block(std::uint32_t j) const {
    const bool single = j == L_.segment_log2;  // a one-block segment needs no flag: its formatter takes it
    detail::device_atomic<std::uint32_t> flag(format_flags()[j - L_.min_block_log2]);
    bool formatting = single;  // this thread may format (holds the flag); it looks once more first
    detail::backoff wait;
    for (;;) {
      std::uint32_t block = find(j);
      if (block == no_block && formatting) {
        const std::uint32_t seg = segment_tree().claim_first();
        if (seg != detail::bit_tree::none) block = block_id(seg, format(seg, j));
      }
      if (block != no_block || formatting) {
        if (formatting && !single) flag.store(0, detail::release);
        return block;
      }
      if (flag.exchange(1, detail::acquire) == 0)
        formatting = true;
      else
        wait.pause();  // another thread formats a segment for j: look again
    }
  }

  // Gives block `index` of segment `seg` (blocks of 2^j bytes) back, every
  // slice of it free. The last block of a segment takes the segment back to
  // the segment tree (S4).
  GPUALLOC_HD void return_block(std::uint32_t seg, std::uint32_t j, std::uint32_t index) const {
    const std::uint32_t n = 1u << (L_.segment_log2 - j);
    segment_header& h = header(seg);
    const std::uint32_t pos = detail::device_atomic<std::uint32_t>(h.tail).fetch_add(1, detail::relaxed);
    detail::device_atomic<std::uint32_t> cell(cells(seg)[pos & (n - 1)]);
    detail::backoff wait;
    while (cell.load(detail::acquire) >> 12 != (pos & sequence_mask))
      wait.pause();  // the taker of pos - n is still reading it
    cell.store((pos + 1) << 12 | index, detail::release);
    counted_in(seg, j, free_blocks(seg).fetch_add(1, detail::acq_rel));
  }

  // The highest run of `count` free segments, handed out whole; returns its
  // first segment or bit_tree::none.
  GPUALLOC_HD std::uint32_t claim_run(std::uint32_t count) const {
    const std::uint32_t first = segment_tree().claim_last_run(count);
    if (first != detail::bit_tree::none)
      detail::device_atomic<std::uint32_t>(kinds()[first]).store(kind_run | count, detail::relaxed);
    return first;
  }

  GPUALLOC_HD void return_run(std::uint32_t first) const {
    const std::uint32_t count = kind(first) & ~kind_run;
    detail::device_atomic<std::uint32_t>(kinds()[first]).store(kind_free, detail::relaxed);
    segment_tree().insert_run(first, count);
  }

  // Init, thread `t` of `threads`: every segment free and unformatted, every
  // block tree empty, no format running. (Rings and counters are written
  // when a segment is formatted.)
  GPUALLOC_HD void init(std::uint64_t t, std::uint64_t threads) const {
    for (std::uint64_t seg = t; seg < L_.segments; seg += threads) {
      kinds()[seg] = kind_free;
      header(seg).format = 0;
      header(seg).free_blocks = unformatted;
      header(seg).head = 0;
      header(seg).tail = 0;
    }
    for (std::uint64_t i = t; i < L_.trees; i += threads) format_flags()[i] = 0;
    const std::uint64_t words = (1 + L_.trees) * L_.tree.words;
    for (std::uint64_t i = t; i < words; i += threads)
      tree_words()[i] = L_.tree.initial_word(static_cast<std::uint32_t>(i % L_.tree.words), i < L_.tree.words);
  }

 private:
  static constexpr std::uint32_t sequence_mask = (1u << 20) - 1;  // of a ring cell's sequence
  static constexpr std::int32_t unformatted = -(1 << 30);

  GPUALLOC_HD detail::device_atomic<std::uint32_t> format_word(std::uint32_t seg) const {
    return detail::device_atomic<std::uint32_t>(header(seg).format);
  }
  GPUALLOC_HD detail::device_atomic<std::int32_t> free_blocks(std::uint32_t seg) const {
    return detail::device_atomic<std::int32_t>(header(seg).free_blocks);
  }

  GPUALLOC_HD std::uint32_t* kinds() const { return reinterpret_cast<std::uint32_t*>(arena_ + L_.kinds_offset); }
  GPUALLOC_HD segment_header& header(std::uint32_t seg) const {
    return reinterpret_cast<segment_header*>(arena_ + L_.headers_offset)[seg];
  }
  GPUALLOC_HD std::uint32_t* cells(std::uint32_t seg) const {
    return reinterpret_cast<std::uint32_t*>(arena_ + L_.cells_offset) + (std::uint64_t{seg} << L_.entries_log2);
  }
  GPUALLOC_HD std::uint32_t* format_flags() const { return reinterpret_cast<std::uint32_t*>(arena_ + L_.flags_offset); }
  GPUALLOC_HD std::uint64_t* tree_words() const { return reinterpret_cast<std::uint64_t*>(arena_ + L_.trees_offset); }
  GPUALLOC_HD detail::bit_tree segment_tree() const { return detail::bit_tree(tree_words(), L_.tree); }
  GPUALLOC_HD detail::bit_tree tree(std::uint32_t j) const {
    return detail::bit_tree(tree_words() + (1 + j - L_.min_block_log2) * L_.tree.words, L_.tree);
  }

  // A free block of 2^j bytes from a segment of block tree j, or no_block.
  GPUALLOC_HD std::uint32_t find(std::uint32_t j) const {
    for (std::uint32_t from = 0;;) {
      const std::uint32_t seg = tree(j).next(from);
      if (seg == detail::bit_tree::none) return no_block;
      const std::uint32_t index = take(seg, j);
      if (index != no_block) return block_id(seg, index);
      sync_tree_bit(seg, j);  // a stale bit
      from = seg + 1;
    }
  }

  // Formats free segment `seg` (just claimed) into blocks of 2^j bytes and
  // takes block 0 for the caller (returns 0): ring positions 0 .. n-1 hold
  // blocks 0 .. n-1, position 0 already taken.
  GPUALLOC_HD std::uint32_t format(std::uint32_t seg, std::uint32_t j) const {
    const std::uint32_t n = 1u << (L_.segment_log2 - j);
    detail::device_atomic<std::uint32_t>(kinds()[seg]).store(kind_blocks | j, detail::relaxed);
    std::uint32_t* c = cells(seg);
    detail::device_atomic<std::uint32_t>(c[0]).store(n << 12, detail::relaxed);
    for (std::uint32_t i = 1; i < n; ++i)
      detail::device_atomic<std::uint32_t>(c[i]).store((i + 1) << 12 | i, detail::relaxed);
    segment_header& h = header(seg);
    detail::device_atomic<std::uint32_t>(h.head).store(1, detail::relaxed);
    detail::device_atomic<std::uint32_t>(h.tail).store(n, detail::relaxed);
    const std::uint32_t old = format_word(seg).load(detail::relaxed);
    format_word(seg).store(((old >> 8) + 1) << 8 | j, detail::release);
    free_blocks(seg).fetch_add(static_cast<std::int32_t>(n - 1) - unformatted, detail::acq_rel);
    if (n > 1) tree(j).insert(seg);
    return 0;
  }

  // Takes a free block from `seg` if it is formatted for j and has one (S2);
  // returns its index or no_block.
  GPUALLOC_HD std::uint32_t take(std::uint32_t seg, std::uint32_t j) const {
    const std::uint32_t seen = format_word(seg).load(detail::acquire);
    if ((seen & 0xffu) != j) return no_block;
    const std::int32_t before = free_blocks(seg).fetch_sub(1, detail::acq_rel);
    if (before <= 0 || format_word(seg).load(detail::acquire) != seen) {  // none left, or formatted anew meanwhile
      const std::int32_t undone = free_blocks(seg).fetch_add(1, detail::acq_rel);
      counted_in(seg, format_word(seg).load(detail::acquire) & 0xffu, undone);
      return no_block;
    }
    if (before == 1) sync_tree_bit(seg, j);  // we took the last one
    segment_header& h = header(seg);
    const std::uint32_t n = 1u << (L_.segment_log2 - j);
    const std::uint32_t pos = detail::device_atomic<std::uint32_t>(h.head).fetch_add(1, detail::relaxed);
    detail::device_atomic<std::uint32_t> cell(cells(seg)[pos & (n - 1)]);
    detail::backoff wait;
    std::uint32_t v;
    while ((v = cell.load(detail::acquire)) >> 12 != ((pos + 1) & sequence_mask))
      wait.pause();  // its giver is still writing it
    cell.store((pos + n) << 12, detail::release);
    return v & 0xfffu;
  }

  // S3: segment `seg`'s bit in tree j, cleared, then set again if the
  // segment has free blocks of size 2^j.
  GPUALLOC_HD void sync_tree_bit(std::uint32_t seg, std::uint32_t j) const {
    tree(j).remove(seg);
    if ((format_word(seg).load(detail::acquire) & 0xffu) == j && free_blocks(seg).load(detail::acquire) > 0)
      tree(j).insert(seg);
  }

  // A block counted back into segment `seg` (formatted for j; 0: not
  // formatted any more), moving `free` from `before`: S3 and S4.
  GPUALLOC_HD void counted_in(std::uint32_t seg, std::uint32_t j, std::int32_t before) const {
    if (j == 0) return;
    const auto n = static_cast<std::int32_t>(1u << (L_.segment_log2 - j));
    if (before + 1 == n) {
      std::int32_t all = n;
      if (free_blocks(seg).compare_exchange_strong(all, unformatted, detail::acq_rel, detail::relaxed)) {
        tree(j).remove(seg);
        format_word(seg).store(format_word(seg).load(detail::relaxed) & ~0xffu, detail::release);
        detail::device_atomic<std::uint32_t>(kinds()[seg]).store(kind_free, detail::relaxed);
        segment_tree().insert(seg);
        return;
      }
    }
    if (before <= 0 && before + 1 > 0) tree(j).insert(seg);
  }

  const layout& L_;
  std::byte* arena_;
};

}  // namespace gpualloc::gallatin_parts
