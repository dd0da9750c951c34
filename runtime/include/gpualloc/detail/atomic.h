// Atomics with explicit scope and order, the same on host and device.
//
// Strategies use these aliases of libcu++'s cuda::atomic_ref so that every
// access says who it synchronises with. Device scope is enough for a heap:
// it is never shared with the host or peer devices while kernels run.
#pragma once

#include <cuda/atomic>

#include "gpualloc/config.h"

namespace gpualloc::detail {

template <class T>
using device_atomic = cuda::atomic_ref<T, cuda::thread_scope_device>;

inline constexpr auto relaxed = cuda::memory_order_relaxed;
inline constexpr auto acquire = cuda::memory_order_acquire;
inline constexpr auto release = cuda::memory_order_release;
inline constexpr auto acq_rel = cuda::memory_order_acq_rel;

// Counters that must not cross a bound: subtract only while at least
// n + keep is there, add only while the sum stays <= limit. Both are
// compare-and-swap loops that never change the counter unless they succeed.
// (A fetch_sub undone on failure makes the counter wrong for a moment; with
// thousands of GPU threads retrying at once those moments overlap, the
// counter stays below n and every taker fails: a livelock, seen on an H100
// with 2,400 lanes spinning on one queue's fill count.)
template <class T>
GPUALLOC_HD bool try_subtract(device_atomic<T> counter, T n, T keep = 0,
                              cuda::memory_order on_success = relaxed) {
  T v = counter.load(relaxed);
  while (v >= n + keep)
    if (counter.compare_exchange_weak(v, v - n, on_success, relaxed)) return true;
  return false;
}

template <class T>
GPUALLOC_HD bool try_add_within(device_atomic<T> counter, T n, T limit) {
  T v = counter.load(relaxed);
  while (v + n <= limit)
    if (counter.compare_exchange_weak(v, v + n, relaxed, relaxed)) return true;
  return false;
}

}  // namespace gpualloc::detail
