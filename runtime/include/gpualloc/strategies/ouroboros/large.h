// Requests larger than a chunk. The original hands them to CUDA's allocator;
// here they stay in the heap, as runs of 1 KiB units on base chunks taken
// for them (descriptor `large`).
//
// The free units of those chunks are in a second 64-ary bit tree (one bit
// per KiB of the chunk area); a block's length in units is kept at its first
// unit, outside the block.
// malloc(k units): a block of at most 14 units first looks for k free units
// in a row among the leftovers of other blocks' chunks (a chunk with all 8
// units free does not stay in the tree, so two neighbouring leftovers hold
// at most 14 and larger blocks never find any there). Otherwise it takes a
// run of ceil(k/8) chunks from the top of the pool, adds the free units at
// the bottom of the chunk just above (a leftover, taken unit by unit), and
// sits at the top of that stretch; whole chunks below it go back to the
// pool, the remaining units into the tree. Runs come from the top downward,
// so consecutive blocks of odd sizes (9000 B: 9 units) pack without gaps,
// and growing needs no search that many threads could collide in.
// free: chunks wholly inside the block go straight back to the pool; its
// units in a chunk it shares go into the tree, and a chunk whose 8 units are
// then all free is taken out of the tree and given back.
//
// Invariants
//  L1 A unit is in the tree only while its chunk is marked large and no
//     block holds it.
//  L2 A large chunk goes back to the pool only from a thread that removed
//     all 8 of its units from the tree (a thread that removes some but not
//     all puts them back), or that holds all 8 (a block covering the whole
//     chunk, a run just taken).
//
// Memory ordering: the tree's operations are acq_rel, so units are taken
// after the insert that freed them and after their previous owner's writes.
// A block's length is written before the block is handed out and read by
// whoever frees it, after the program's own hand-over of the block.
#pragma once

#include <cstdint>

#include "gpualloc/detail/bit_tree.h"
#include "gpualloc/strategies/ouroboros/chunk_pool.h"
#include "gpualloc/strategies/ouroboros/layout.h"

namespace gpualloc::strategies::ouro {

struct large_blocks {
  static constexpr unsigned unit_shift = 10;
  static constexpr std::uint64_t units_per_chunk = chunk_bytes >> unit_shift;  // 8
  static constexpr std::uint64_t among_leftovers = 2 * (units_per_chunk - 1);  // 14

  // The tree's layout for `chunks` chunks, and the bytes its words and the lengths take.
  static std::uint64_t plan(std::uint32_t chunks, detail::bit_tree_layout& units) {
    units = detail::bit_tree_layout::make(std::uint64_t{chunks} * units_per_chunk);
    return lengths_offset(units) + std::uint64_t{chunks} * units_per_chunk * sizeof(std::uint32_t);
  }

  GPUALLOC_HD static void init(heap h, std::uint64_t thread, std::uint64_t threads) {
    std::uint64_t* words = h.at<std::uint64_t>(h.L.large);
    for (std::uint64_t w = thread; w < h.L.unit_layout.words; w += threads) words[w] = 0;  // no unit free
  }

  // A block of `bytes` (more than a chunk), or NULL.
  template <class Reclaim>
  GPUALLOC_HD __attribute__((noinline)) static void* malloc(heap h, std::uint64_t bytes, Reclaim&& reclaim) {
    const std::uint64_t k = (bytes + (std::uint64_t{1} << unit_shift) - 1) >> unit_shift;
    if (k > std::uint64_t{h.L.chunks} * units_per_chunk) return nullptr;
    const detail::bit_tree units = tree(h);
    if (k <= among_leftovers) {
      const std::uint64_t u = units.claim_last_run(k);
      if (u != detail::bit_tree::none) return hand_out(h, u, k);
    }
    const std::uint64_t m = (k + units_per_chunk - 1) / units_per_chunk;
    std::uint32_t x = no_chunk;
    for (bool reclaimed = false;; reclaimed = true) {
      if (chunk_pool::reserve(h, m)) x = chunk_pool::take_reserved_run(h, m);
      if (x != no_chunk) break;
      if (reclaimed || !reclaim()) return nullptr;
    }
    for (std::uint64_t i = 0; i < m; ++i)
      h.store_desc(static_cast<std::uint32_t>(x + i), descriptor::make(descriptor::large, 0, 0));
    const std::uint64_t bottom = std::uint64_t{x} * units_per_chunk, top = bottom + m * units_per_chunk;
    std::uint64_t above = 0;  // free units taken from the bottom of the chunk above
    if (x + m < h.L.chunks)
      while (above + 1 < units_per_chunk && units.remove(top + above)) ++above;
    const std::uint64_t start = top + above - k;
    const std::uint64_t whole = (start - bottom) / units_per_chunk;  // chunks of the run below the block
    if (whole != 0) chunk_pool::give(h, x, whole);
    if (start > bottom + whole * units_per_chunk)
      units.insert_run(bottom + whole * units_per_chunk, start - bottom - whole * units_per_chunk);
    return hand_out(h, start, k);
  }

  // Frees the block that starts at unit u.
  GPUALLOC_HD __attribute__((noinline)) static void free(heap h, std::uint64_t u) {
    const std::uint64_t end = u + lengths(h)[u];
    const detail::bit_tree units = tree(h);
    std::uint64_t x = u / units_per_chunk;
    if (u % units_per_chunk != 0) {  // the block starts inside chunk x
      const std::uint64_t stop = (x + 1) * units_per_chunk < end ? (x + 1) * units_per_chunk : end;
      units.insert_run(u, stop - u);
      give_back_if_free(h, static_cast<std::uint32_t>(x++));
    }
    const std::uint64_t whole_end = end / units_per_chunk;  // chunks [x, whole_end) lie wholly inside
    if (whole_end > x) {
      chunk_pool::give(h, static_cast<std::uint32_t>(x), whole_end - x);
      x = whole_end;
    }
    if (x * units_per_chunk < end) {  // the block ends inside chunk x
      units.insert_run(x * units_per_chunk, end - x * units_per_chunk);
      give_back_if_free(h, static_cast<std::uint32_t>(x));
    }
  }

 private:
  GPUALLOC_HD static std::uint64_t lengths_offset(const detail::bit_tree_layout& units) {
    return (units.words * sizeof(std::uint64_t) + 127) / 128 * 128;
  }
  GPUALLOC_HD static detail::bit_tree tree(heap h) {
    return detail::bit_tree(h.at<std::uint64_t>(h.L.large), h.L.unit_layout);
  }
  GPUALLOC_HD static std::uint32_t* lengths(heap h) {
    return h.at<std::uint32_t>(h.L.large + lengths_offset(h.L.unit_layout));
  }

  GPUALLOC_HD static void* hand_out(heap h, std::uint64_t u, std::uint64_t k) {
    lengths(h)[u] = static_cast<std::uint32_t>(k);
    return h.chunk(0) + (u << unit_shift);
  }

  // L2: takes chunk x's units out of the tree if all 8 are there, and gives x back.
  GPUALLOC_HD static void give_back_if_free(heap h, std::uint32_t x) {
    const detail::bit_tree units = tree(h);
    const std::uint64_t first = std::uint64_t{x} * units_per_chunk;
    for (std::uint64_t i = 0; i < units_per_chunk; ++i) {
      if (!units.remove(first + i)) {
        if (i != 0) units.insert_run(first, i);
        return;
      }
    }
    chunk_pool::give(h, x, 1);
  }
};

}  // namespace gpualloc::strategies::ouro
