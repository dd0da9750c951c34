// Exponential back-off for spin loops.
//
// On the device a waiting thread sleeps with __nanosleep, so the warp yields
// its issue slots to the thread it waits for; on the host it yields the core.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"

#if !GPUALLOC_ON_DEVICE
#include <thread>
#endif

namespace gpualloc::detail {

class backoff {
 public:
  // Sleeps double from 8 ns up to the cap (a power of two times 8): a
  // waiter whose wait ends with another thread's short step can cap it lower.
  GPUALLOC_HD explicit backoff(std::uint32_t max_delay_ns = 1024) : max_delay_ns_(max_delay_ns) {}

  GPUALLOC_HD void pause() {
#if GPUALLOC_ON_DEVICE
    __nanosleep(delay_ns_);
#else
    std::this_thread::yield();
#endif
    if (delay_ns_ < max_delay_ns_) delay_ns_ *= 2;
  }

 private:
  std::uint32_t max_delay_ns_;
  std::uint32_t delay_ns_ = 8;
};

}  // namespace gpualloc::detail
