// One heap per CUDA context.
//
// Invariants:
//  - A context has at most one heap; it is created at the first launch of a
//    kernel whose module carries the gpualloc runtime (or when a graph with
//    such a kernel is built or instantiated), in that context, and lives
//    until the context is destroyed or reset.
//  - The heap's header is written by the host (magic, strategy, flags, sizes,
//    zeroed counters) and then the strategy's init kernels run over it on the
//    heap's own non-blocking stream; both finish before the heap is handed out.
//  - For strategy `cuda` the heap is only a header: allocations live in CUDA's
//    own heap, whose size is set with cuCtxSetLimit when the heap is created.
//
// Locking: every function here must be called with state_lock() held, and the
// caller must have made the context current (context_scope) where noted.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>

#include <cuda.h>

#include "gpualloc/heap.h"
#include "gpualloc/registry.h"

namespace gpualloc::interpose {

struct context_heap {
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  unsigned long long ctx_id = 0;   // cuCtxGetId, for messages
  strategy_id strategy{};
  std::uint32_t flags = 0;         // heap_flags
  CUdeviceptr header = 0;          // device address of the heap_header
  std::uint64_t bytes = 0;         // our allocation (the header's heap_bytes)
  std::uint64_t cuda_heap_bytes = 0;  // strategy cuda: CUDA's heap limit
  CUstream stream = nullptr;       // libgpualloc's own non-blocking stream in ctx
  CUmodule init_module = nullptr;  // the embedded init kernels, loaded on first need
  CUfunction init_kernel = nullptr;
  std::uint64_t errors_reported = 0;  // checked mode: double + foreign frees already reported
};

// The one lock of libgpualloc's state (heaps, wishes, module caches).
std::mutex& state_lock();

// The heap of ctx, or null.
context_heap* find_heap(CUcontext ctx);

// The heap of ctx, created if needed. ctx must be current. On failure a
// message (with bytes tried and free) is printed and the error returned.
CUresult ensure_heap(CUcontext ctx, context_heap** out);

// Rewrites the header (counters zeroed) and re-runs the strategy's init.
// Synchronises the context first.
CUresult reset_heap(context_heap& heap);

// Synchronises the heap's context and copies its counters.
CUresult read_counters(context_heap& heap, heap_counters* out);

// Forgets ctx before it is destroyed: collects its statistics (when enabled;
// `known`: counters already read, else they are read now) and drops its heap,
// its size wish and its module cache entries.
void retire_context(CUcontext ctx, const heap_counters* known);

// The program's cudaDeviceSetLimit(cudaLimitMallocHeapSize) for ctx, honoured
// when the heap is created (GPUALLOC_HEAP_SIZE wins over it).
void set_heap_wish(CUcontext ctx, std::uint64_t bytes);

// The size a heap of ctx has, or would have if created now (ctx current).
std::uint64_t heap_size_for_limit(CUcontext ctx);

// Calls fn(heap) for every live heap.
template <class Fn>
void for_each_heap(Fn&& fn);

void for_each_heap_impl(void (*fn)(context_heap&, void*), void* user);

template <class Fn>
void for_each_heap(Fn&& fn) {
  for_each_heap_impl([](context_heap& h, void* user) { (*static_cast<Fn*>(user))(h); }, &fn);
}

}  // namespace gpualloc::interpose
