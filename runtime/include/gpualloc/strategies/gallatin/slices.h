// Gallatin's slices (McCoy & Pandey 2024, sections 4.3 and 5): a block of
// size class c holds N = 2^count_log2 slices of 16 B << c, handed out in
// order by one counter and counted back by another; the block is recycled
// (back to its segment's ring) when all N are back.
//
// Per block (block_counters, layout.h):
//   taken      [tag:8 | count:56]. The tag says what the block is now:
//              1 + c for slices of class c, whole_tag for a block handed out
//              whole. A request adds the slices it wants to `count` (one
//              fetch-add for a whole group of lanes) and owns slices
//              [before, before + k) of those below N.
//   remaining  N at the start; frees, and the corrections below, subtract.
//              The thread that takes it to 0 recycles the block.
//
// Invariants
//  B1 Every slice index below N is handed out at most once per incarnation
//     of a block (from `start` to its recycling): indices come from `count`,
//     which only grows until the next start.
//  B2 `remaining` reaches 0 exactly when every index below N has been
//     accounted for once: freed by its owner, or credited back because no
//     one can use it. Credits: a run of k slices credits k-1 when it is taken
//     (its single free returns the last one); a run that does not fit the
//     block's end credits the indices it covered below N; a request that
//     finds the block carrying another tag (it read a stale buffer slot, the
//     block was recycled and started again for another use) credits the
//     indices below that use's N it covered. So a block is recycled only
//     after its last user is done, and never leaks.
//  B3 A recycled block's count stays >= its N (everything was taken), so a
//     late request that still adds to it gets nothing, until `start` stores
//     a new tag and count 0 for the next incarnation; a whole block's count
//     starts at `closed`, out of any request's reach. Headroom: a request
//     adds at most 32 lanes x 512 slices (2^14), and only requests that read
//     the block's slot before its replacement (or a stale copy) add past N,
//     one add per group and stale read (gallatin.h G1): the 2^28 - 2^26
//     counts above `closed` hold 12288 of the largest adds, more than the
//     groups of a GPU that can hold a stale slot at once.
//
// Memory ordering: `start` stores `taken` with release after writing
// `remaining`; a request's fetch-add is acquire, so its slices are ordered
// after the block's recycling and with it after every earlier owner's free.
// Frees subtract with release (the freer's writes go with it); only the one
// that reaches 0 then loads `remaining` with acquire, which orders the
// recycler after every free of the block (all of them in the release
// sequence it reads from), so a plain free pays no acquire.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/strategies/gallatin/layout.h"
#include "gpualloc/strategies/gallatin/segments.h"

namespace gpualloc::gallatin_parts {

inline constexpr std::uint32_t count_bits = 28;
inline constexpr std::uint32_t count_mask = (1u << count_bits) - 1;
inline constexpr std::uint32_t whole_tag = 0xf;
inline constexpr std::uint32_t closed = 1u << 26;

GPUALLOC_INLINE std::uint32_t class_tag(std::uint32_t c) { return c + 1; }
GPUALLOC_INLINE std::uint32_t tag_of(std::uint32_t taken) { return taken >> count_bits; }

class slices {
 public:
  GPUALLOC_HD slices(const layout& L, std::byte* arena) : L_(L), arena_(arena) {}

  GPUALLOC_HD segment_table segments() const { return segment_table(L_, arena_); }

  // Starts block `block` as N slices of class c, or as one block handed out whole.
  GPUALLOC_HD void start(std::uint32_t block, std::uint32_t c) const {
    block_counters& b = segments().counters(block);
    detail::device_atomic<std::uint32_t>(b.remaining).store(1u << L_.cls[c].count_log2, detail::relaxed);
    detail::device_atomic<std::uint32_t>(b.taken).store(class_tag(c) << count_bits, detail::release);
  }
  GPUALLOC_HD void start_whole(std::uint32_t block) const {
    block_counters& b = segments().counters(block);
    detail::device_atomic<std::uint32_t>(b.remaining).store(1, detail::relaxed);
    detail::device_atomic<std::uint32_t>(b.taken).store(whole_tag << count_bits | closed, detail::release);
  }

  // Adds n to the block's taken count; returns the word before (B1).
  GPUALLOC_HD std::uint32_t take(std::uint32_t block, std::uint32_t n) const {
    return detail::device_atomic<std::uint32_t>(segments().counters(block).taken).fetch_add(n, detail::acquire);
  }

  // Accounts for n slices of the block (B2); the last one recycles it.
  GPUALLOC_HD void give_back(std::uint32_t block, std::uint32_t n) const {
    detail::device_atomic<std::uint32_t> remaining(segments().counters(block).remaining);
    if (remaining.fetch_sub(n, detail::release) == n) {
      remaining.load(detail::acquire);  // the recycler is ordered after every give-back (their release sequence)
      recycle(block);
    }
  }

  // A request of class c added n to a block whose word was `before` but
  // whose tag is another's: credit what it covered of that use (B2).
  __attribute__((noinline)) GPUALLOC_HD void give_back_foreign(std::uint32_t block, std::uint32_t before,
                                                               std::uint32_t n) const {
    const std::uint32_t tag = tag_of(before);
    if (tag == 0 || tag > classes) return;  // a whole block: its count is closed
    const std::uint32_t slices_per_block = 1u << L_.cls[tag - 1].count_log2;
    const std::uint32_t start = before & count_mask;
    if (start < slices_per_block) give_back(block, n < slices_per_block - start ? n : slices_per_block - start);
  }

  // Where block `block` of class c (or of 2^block_log2 bytes) lies in the data.
  GPUALLOC_HD std::uint64_t offset(std::uint32_t block, std::uint32_t block_log2) const {
    const std::uint32_t index = block & ((1u << L_.entries_log2) - 1);
    return std::uint64_t{block >> L_.entries_log2} << L_.segment_log2 | std::uint64_t{index} << block_log2;
  }

 private:
  __attribute__((noinline)) GPUALLOC_HD void recycle(std::uint32_t block) const {
    const segment_table T = segments();
    const std::uint32_t seg = block >> L_.entries_log2;
    T.return_block(seg, T.kind(seg) & 0xffu, block & ((1u << L_.entries_log2) - 1));
  }

  const layout& L_;
  std::byte* arena_;
};

}  // namespace gpualloc::gallatin_parts
