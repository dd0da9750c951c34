// Atomics with explicit scope and order, the same on host and device.
//
// Strategies use these aliases of libcu++'s cuda::atomic_ref so that every
// access says who it synchronises with. Device scope is enough for a heap:
// it is never shared with the host or peer devices while kernels run.
#pragma once

#include <cuda/atomic>

namespace gpualloc::detail {

template <class T>
using device_atomic = cuda::atomic_ref<T, cuda::thread_scope_device>;

inline constexpr auto relaxed = cuda::memory_order_relaxed;
inline constexpr auto acquire = cuda::memory_order_acquire;
inline constexpr auto release = cuda::memory_order_release;
inline constexpr auto acq_rel = cuda::memory_order_acq_rel;

}  // namespace gpualloc::detail
