// Pseudo-random numbers for randomised searches, one generator per thread
// and call: the random walk's probes (strategies/random_walk).
//
// The seed mixes what tells threads and calls apart: on the device the
// cycle counter, the SM, the warp slot and the lane; on the host the thread
// and the clock. Two lanes with the same seed would probe the same places
// and collide at every step, so the lane and warp slot go in as well as the
// clock (the lanes of a warp read one clock value). The numbers are not for
// anything but spreading probes: xorshift32 (Marsaglia 2003), a multiply to
// map into a range.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"

#if !GPUALLOC_ON_DEVICE
#include <chrono>
#include <functional>
#include <thread>
#endif

namespace gpualloc::detail {

// A 64-bit mix (the finaliser of MurmurHash3): every input bit moves every output bit.
GPUALLOC_INLINE std::uint64_t mix64(std::uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

class walk_random {
 public:
  // A generator seeded for this thread now.
  GPUALLOC_HD static walk_random seeded() {
#if GPUALLOC_ON_DEVICE
    std::uint64_t clock;
    std::uint32_t sm, warp, lane;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(clock));
    asm("mov.u32 %0, %%smid;" : "=r"(sm));
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    const std::uint64_t who = std::uint64_t{sm} << 16 | std::uint64_t{warp} << 8 | lane;
#else
    const auto clock = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    const std::uint64_t who = std::hash<std::thread::id>{}(std::this_thread::get_id());
#endif
    const auto s = static_cast<std::uint32_t>(mix64(clock ^ mix64(who)));
    return walk_random(s != 0 ? s : 0x9e3779b9u);  // xorshift never leaves 0
  }

  GPUALLOC_HD std::uint32_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    return state_;
  }

  // A number in [0, n), n <= 2^32.
  GPUALLOC_HD std::uint64_t below(std::uint64_t n) { return (std::uint64_t{next()} * n) >> 32; }

 private:
  GPUALLOC_HD explicit walk_random(std::uint32_t s) : state_(s) {}
  std::uint32_t state_;
};

}  // namespace gpualloc::detail
