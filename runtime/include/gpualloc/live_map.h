// Checked mode's map of live blocks: one bit per live_granule (16) bytes of
// the arena, set while a checked block whose header starts there is live
// (from its malloc to its free). The sweep after each kernel and the leak
// report walk it (runtime/src/checks.cu). A strategy without an arena
// (`cuda`) has no map: its live blocks are counted, not listed.
//
// Memory ordering: the bit is set with release after the header and zones
// are written, so a walker that loads its word with acquire reads a whole
// header; the free that won the block's tag clears it (relaxed) before the
// block enters the quarantine. A walker re-validates what it finds (seal,
// tag live): the block may be freed while it looks.
#pragma once

#include <cstdint>

#include "gpualloc/checked.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/heap.h"

namespace gpualloc::checked {

// The word and bit of `header` in h's map; false where it has none.
GPUALLOC_INLINE bool live_bit_of(const heap_header* h, const void* header, std::uint64_t** word, std::uint64_t* bit) {
  if (h->checks.live == nullptr || !h->space.contains(header)) return false;
  const std::uint64_t granule = (static_cast<const std::byte*>(header) - h->space.begin) / live_granule;
  *word = h->checks.live + granule / 64;
  *bit = std::uint64_t{1} << (granule % 64);
  return true;
}

GPUALLOC_INLINE void mark_live(const heap_header* h, const void* header) {
  std::uint64_t* word;
  std::uint64_t bit;
  if (live_bit_of(h, header, &word, &bit)) detail::device_atomic<std::uint64_t>(*word).fetch_or(bit, detail::release);
}

GPUALLOC_INLINE void mark_dead(const heap_header* h, const void* header) {
  std::uint64_t* word;
  std::uint64_t bit;
  if (live_bit_of(h, header, &word, &bit)) detail::device_atomic<std::uint64_t>(*word).fetch_and(~bit, detail::relaxed);
}

// Word `i` of the map (acquire: its set bits' headers are whole).
GPUALLOC_INLINE std::uint64_t live_word(const heap_header* h, std::uint64_t i) {
  return detail::device_atomic<std::uint64_t>(h->checks.live[i]).load(detail::acquire);
}

// The header of bit `bit` of word `i`.
GPUALLOC_INLINE checked_header* live_header(const heap_header* h, std::uint64_t i, int bit) {
  return reinterpret_cast<checked_header*>(h->space.begin + (i * 64 + bit) * live_granule);
}

}  // namespace gpualloc::checked
