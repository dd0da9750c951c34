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
//   state   one 64-bit word [free:32 | format:32], so that every count
//           operation also says which format it counted in:
//           format  [generation:24 | j:8 (0: not formatted)]; a new format,
//                   a new generation
//           free    the count of free blocks nobody has claimed (signed;
//                   `unformatted`, far below zero, while the segment is not
//                   formatted)
//   ring    head, tail and one cell per block: a bounded queue of the free
//           blocks' indices (Vyukov's: cell p mod n holds [sequence:20 |
//           block:12], the sequence p+1 once position p was given back, p+n
//           once it was taken again; modulo 2^20, which n divides).
//
// Invariants
//  S1 A segment is in exactly one place: set in the segment tree (free),
//     formatted (format's j != 0), or handed out as part of a run.
//  S2 A taker reads the format, decrements `free` (one fetch-sub on the
//     state: a burst of takers does not serialise as compare-and-swap
//     retries would), and keeps its claim only if the state it decremented
//     had a positive count and the format it read; otherwise it adds the 1
//     back. Such transient decrements never lose a block: every add-back is
//     counted like a give-back (S3, S4), in the format its own add saw. A
//     claim then takes a ring position. A block goes back by ring first,
//     count second. A segment is formatted by one add to the state (n-1 to
//     `unformatted`, the new format for the old: never by storing), so the
//     late decrements and add-backs of takers that read an older format
//     cancel out.
//  S3 A segment leaves its block tree's set only while it has no free
//     blocks or is no longer formatted for it: whoever moves `free` from
//     above 0 to 0 clears the bit and rereads the count (sync_tree_bit);
//     whoever moves it from 0 or below to above 0 sets it. So no segment with
//     free blocks is lost to its tree. Stale set bits are harmless: a taker
//     fails on them and clears them.
//  S4 Whoever moves `free` to n (all blocks home) reclaims the segment with
//     one compare-and-swap of the state from (that format, n) to
//     (`unformatted`, j 0): no take can then succeed, and no block of it is
//     out, so the ring is quiet when the segment goes back to the segment
//     tree and is formatted again. The format in the compared state makes a
//     late reclaimer fail once the segment has been formatted anew. (With
//     the count alone, a thread that had moved an old format's count to n
//     and was slow to reclaim could reclaim a newer format whose count was
//     n by chance, with blocks of it out: their givers then waited on a
//     ring that was not theirs, and pages were handed out twice, seen as a
//     hang of the ThreadSanitizer test and reproduced with delays.)
//  S5 At most one thread formats a segment for tree j at a time (the tree's
//     format flag), so a burst of requests for one size formats one segment,
//     not one each; the others wait (with back-off) and take blocks from it.
//     A segment of a single block skips the flag: its formatter takes it.
//
// Memory ordering: the state's read-modify-writes are acq_rel, the
// formatter's add included: a taker is ordered after the formatter (ring
// cells, kind, format) and after the thread that gave its block back. Ring cells: acquire loads, release
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
    counted_in(seg, state(seg).fetch_add(one_free, detail::acq_rel));
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
      header(seg).state = unformatted_state;
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
  static constexpr std::uint64_t one_free = std::uint64_t{1} << 32;  // one block in the state's count
  static constexpr std::uint64_t unformatted_state = std::uint64_t{static_cast<std::uint32_t>(unformatted)} << 32;

  GPUALLOC_HD detail::device_atomic<std::uint64_t> state(std::uint32_t seg) const {
    return detail::device_atomic<std::uint64_t>(header(seg).state);
  }
  GPUALLOC_HD static std::int32_t free_of(std::uint64_t state) { return static_cast<std::int32_t>(state >> 32); }
  GPUALLOC_HD static std::uint32_t format_of(std::uint64_t state) { return static_cast<std::uint32_t>(state); }
  GPUALLOC_HD static std::uint32_t j_of(std::uint64_t state) { return format_of(state) & 0xffu; }

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
    // Only this thread changes the format now (S1): its old value is stable,
    // and the add below leaves exactly the new one, whatever late count
    // changes the state holds (modulo 2^64).
    const std::uint32_t old = format_of(state(seg).load(detail::relaxed));
    const std::uint32_t now = ((old >> 8) + 1) << 8 | j;
    const std::uint64_t count = static_cast<std::uint32_t>(static_cast<std::int32_t>(n - 1) - unformatted);
    state(seg).fetch_add((count << 32) + now - old, detail::acq_rel);
    if (n > 1) tree(j).insert(seg);
    return 0;
  }

  // Takes a free block from `seg` if it is formatted for j and has one (S2);
  // returns its index or no_block.
  GPUALLOC_HD std::uint32_t take(std::uint32_t seg, std::uint32_t j) const {
    const std::uint32_t seen = format_of(state(seg).load(detail::acquire));
    if ((seen & 0xffu) != j) return no_block;
    const std::uint64_t before = state(seg).fetch_sub(one_free, detail::acq_rel);
    if (free_of(before) <= 0 || format_of(before) != seen) {  // none left, or formatted anew meanwhile
      counted_in(seg, state(seg).fetch_add(one_free, detail::acq_rel));
      return no_block;
    }
    if (free_of(before) == 1) sync_tree_bit(seg, j);  // we took the last one
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
    const std::uint64_t now = state(seg).load(detail::acquire);
    if (j_of(now) == j && free_of(now) > 0) tree(j).insert(seg);
  }

  // A block counted back into segment `seg`: `before` is the state that
  // this thread's add changed, so its format is the one the block was
  // counted in (j 0: not formatted any more). S3 and S4.
  GPUALLOC_HD void counted_in(std::uint32_t seg, std::uint64_t before) const {
    const std::uint32_t j = j_of(before);
    if (j == 0) return;
    const auto n = static_cast<std::int32_t>(1u << (L_.segment_log2 - j));
    const std::int32_t free = free_of(before);
    if (free + 1 == n) {
      std::uint64_t all = before + one_free;  // this format, every block home
      const std::uint64_t reclaimed = unformatted_state | (format_of(before) & ~0xffu);
      if (state(seg).compare_exchange_strong(all, reclaimed, detail::acq_rel, detail::relaxed)) {
        tree(j).remove(seg);
        detail::device_atomic<std::uint32_t>(kinds()[seg]).store(kind_free, detail::relaxed);
        segment_tree().insert(seg);
        return;
      }
    }
    if (free <= 0 && free + 1 > 0) tree(j).insert(seg);
  }

  const layout& L_;
  std::byte* arena_;
};

}  // namespace gpualloc::gallatin_parts
