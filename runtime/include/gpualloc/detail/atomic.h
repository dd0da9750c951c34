// Atomics with explicit scope and order, the same on host and device.
//
// Strategies use these aliases of libcu++'s cuda::atomic_ref so that every
// access says who it synchronises with. Device scope is enough for a heap:
// it is never shared with the host or peer devices while kernels run.
#pragma once

#include <cuda/atomic>

#include "gpualloc/abi.h"
#include "gpualloc/config.h"

namespace gpualloc::detail {

template <class T>
using device_atomic = cuda::atomic_ref<T, cuda::thread_scope_device>;

inline constexpr auto relaxed = cuda::memory_order_relaxed;
inline constexpr auto acquire = cuda::memory_order_acquire;
inline constexpr auto release = cuda::memory_order_release;
inline constexpr auto acq_rel = cuda::memory_order_acq_rel;

// Fence-based acquire and release for code whose atomics are relaxed on the
// device and ordered on the host: ThreadSanitizer does not model fences, so
// the host build orders each operation itself and needs no fence. (One
// release fence before several writes costs one fence; on sm_90 a release
// read-modify-write is a fence of its own, which also waits for the
// thread's earlier atomics.)
// `device_or_host(d, h)` is such an operation's order: d on the device, h on the host.
// On the device they are abi.h's fences, which become one-way fences on
// GPUs that have them. (2^20 frees, fresh 16 GiB heap, H100: fence.release
// instead of fence.acq_rel, which also invalidates the SM's L1, 0.88-0.94 of
// the time at one size, 0.92-1.03 at mixed sizes; three rounds, the joined
// build against the one before.)
GPUALLOC_HD inline void acquire_fence_on_device() {
#if GPUALLOC_ON_DEVICE
  asm volatile(GPUALLOC_ACQUIRE_FENCE_ASM ::: "memory");
#endif
}
GPUALLOC_HD inline void release_fence_on_device() {
#if GPUALLOC_ON_DEVICE
  asm volatile(GPUALLOC_RELEASE_FENCE_ASM ::: "memory");
#endif
}
GPUALLOC_HD constexpr cuda::memory_order device_or_host(cuda::memory_order on_device, cuda::memory_order on_host) {
  return GPUALLOC_ON_DEVICE ? on_device : on_host;
}

// Counters that must not cross a bound, taken from or added to by threads
// that retry until they succeed (a queue's fill count, a semaphore's waiters).
// One load first: only a thread that saw room changes the counter, with one
// fetch-add undone if it lost the race. Without the load, every retrying
// thread's failed subtraction holds the counter low until its undo; 2,400
// lanes retrying on one queue's fill count on an H100 kept it low for each
// other forever (a livelock). A compare-and-swap loop instead never leaves
// the counter wrong, but under that contention only one of the threads
// succeeds per round trip, and Ouroboros-C-VA took 3x as long.
// try_take_counted takes n only if the counter keeps at least `keep`.
template <class T>
GPUALLOC_HD bool try_take_counted(device_atomic<T> counter, T n, cuda::memory_order on_success = relaxed,
                                  T keep = 0) {
  if (counter.load(relaxed) < n + keep) return false;
  if (counter.fetch_sub(n, on_success) >= n + keep) return true;
  counter.fetch_add(n, relaxed);
  return false;
}

template <class T>
GPUALLOC_HD bool try_add_counted(device_atomic<T> counter, T n, T limit) {
  if (counter.load(relaxed) + n > limit) return false;
  if (counter.fetch_add(n, relaxed) + n <= limit) return true;
  counter.fetch_sub(n, relaxed);
  return false;
}

}  // namespace gpualloc::detail
