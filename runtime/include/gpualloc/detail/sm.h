// Which streaming multiprocessor a thread runs on, and how many there are.
//
// Strategies that keep state per SM (cmmalloc and cfmmalloc's shards,
// gallatin's and sm-slab's per-SM blocks, Ouroboros-VL's walk hints, the
// Ouroboros C variants' chunk hints and its chunk pool's spread) read these.
// On the device they are PTX special registers: %smid (the SM running this
// thread; fixed for a thread's lifetime, though not guaranteed dense) and
// %nsmid (one more than the largest %smid; may exceed the SM count). On the
// host a "SM" is a hash of the thread id over `host_sm_count` pretend SMs,
// so CPU stress tests spread their threads over several shards.
//
// The shard count a strategy uses is a run-time value it stores in its own
// state (read from sm_count() when the heap is initialised), never a
// compile-time constant tied to one GPU.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"

#if !GPUALLOC_ON_DEVICE
#include <functional>
#include <thread>
#endif

namespace gpualloc::detail {

// Pretend SMs on the host.
inline constexpr std::uint32_t host_sm_count = 16;

GPUALLOC_INLINE std::uint32_t sm_id() {
#if GPUALLOC_ON_DEVICE
  std::uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
#else
  std::uint64_t h = std::hash<std::thread::id>{}(std::this_thread::get_id());
  h ^= h >> 33;  // std::hash of a thread id is often the pthread_t: mix its bits
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<std::uint32_t>(h % host_sm_count);
#endif
}

GPUALLOC_INLINE std::uint32_t sm_count() {
#if GPUALLOC_ON_DEVICE
  std::uint32_t n;
  asm("mov.u32 %0, %%nsmid;" : "=r"(n));
  return n;
#else
  return host_sm_count;
#endif
}

}  // namespace gpualloc::detail
