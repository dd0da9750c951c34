// Bit positions and counts in 64-bit words, the same on host and device (clang and nvcc).
#pragma once

#include <cstdint>

#include "gpualloc/config.h"

namespace gpualloc::detail {

// Index of the lowest set bit of x (x != 0).
GPUALLOC_INLINE std::uint32_t lowest_bit(std::uint64_t x) {
#if GPUALLOC_ON_DEVICE
  return static_cast<std::uint32_t>(__ffsll(static_cast<long long>(x)) - 1);
#else
  return static_cast<std::uint32_t>(__builtin_ctzll(x));
#endif
}

// Index of the highest set bit of x (x != 0): floor(log2 x).
GPUALLOC_INLINE std::uint32_t highest_bit(std::uint64_t x) {
#if GPUALLOC_ON_DEVICE
  return 63u - static_cast<std::uint32_t>(__clzll(static_cast<long long>(x)));
#else
  return 63u - static_cast<std::uint32_t>(__builtin_clzll(x));
#endif
}

// ceil(log2 x) for x >= 1.
GPUALLOC_INLINE std::uint32_t ceil_log2(std::uint64_t x) { return x <= 1 ? 0 : highest_bit(x - 1) + 1; }

// Bits 0 .. n-1 set (n <= 64).
GPUALLOC_INLINE std::uint64_t low_bits(std::uint32_t n) {
  return n >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1;
}

// Set bits of v.
GPUALLOC_INLINE std::uint32_t popcount(std::uint64_t v) {
#if GPUALLOC_ON_DEVICE
  return static_cast<std::uint32_t>(__popcll(static_cast<unsigned long long>(v)));
#else
  return static_cast<std::uint32_t>(__builtin_popcountll(v));
#endif
}

// The k lowest set bits of v (all of them if v has fewer).
GPUALLOC_INLINE std::uint64_t lowest_set_bits(std::uint64_t v, std::uint32_t k) {
  std::uint64_t m = 0;
  for (; v != 0 && k != 0; --k, v &= v - 1) m |= v & (~v + 1);
  return m;
}

// Index of the n-th (from 0) set bit of v; v has more than n set bits.
// Bits set from bit 0 up without a gap (a fresh claim's, sm_slab.h) answer
// at once; the search otherwise takes some sixty instructions on sm_90.
GPUALLOC_INLINE std::uint32_t nth_set_bit(std::uint64_t v, std::uint32_t n) {
  if ((v & (v + 1)) == 0) return n;
#if GPUALLOC_ON_DEVICE
  const auto lo = static_cast<unsigned>(v);
  const auto below = static_cast<std::uint32_t>(__popc(lo));
  if (n < below) return static_cast<std::uint32_t>(__fns(lo, 0, static_cast<int>(n) + 1));
  return 32 + static_cast<std::uint32_t>(__fns(static_cast<unsigned>(v >> 32), 0, static_cast<int>(n - below) + 1));
#else
  for (; n != 0; --n) v &= v - 1;
  return lowest_bit(v);
#endif
}

}  // namespace gpualloc::detail
