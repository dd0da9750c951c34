// Nanoseconds from a clock that only moves forward.
//
// On the device the global timer (%globaltimer: the same for every SM, in
// ns, updated about once a microsecond); on the host steady_clock. For
// heuristics that limit how often a slow path runs, never for ordering.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"

#if !GPUALLOC_ON_DEVICE
#include <chrono>
#endif

namespace gpualloc::detail {

GPUALLOC_INLINE std::uint64_t now_ns() {
#if GPUALLOC_ON_DEVICE
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
#endif
}

}  // namespace gpualloc::detail
