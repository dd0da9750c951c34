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
  GPUALLOC_HD backoff() = default;
  // A waiter whose wait ends when another thread's short step does can cap its sleep lower.
  GPUALLOC_HD explicit backoff(std::uint32_t max_delay_ns) : max_delay_ns_(max_delay_ns) {}

  GPUALLOC_HD void pause() {
#if GPUALLOC_ON_DEVICE
    __nanosleep(delay_ns_);
#else
    std::this_thread::yield();
#endif
    if (delay_ns_ < max_delay_ns_) delay_ns_ *= 2;
  }

 private:
  std::uint32_t max_delay_ns_ = 1024;
  std::uint32_t delay_ns_ = 8;
};

}  // namespace gpualloc::detail
