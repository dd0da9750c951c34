// Bit positions in 64-bit words, the same on host and device (clang and nvcc).
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

}  // namespace gpualloc::detail
