// One heap per CUDA context.
//
// Invariants:
//  - A context has at most one heap, keyed by its context id (cuCtxGetId:
//    unique for the process's lifetime, unlike a CUcontext pointer that a new
//    context may reuse). It is created at the first launch of a kernel whose
//    module carries the gpualloc runtime (or when a graph with such a kernel
//    is built or instantiated), in that context, and lives until the context
//    is destroyed or reset.
//  - The heap's header is written by the host (magic, strategy, flags, sizes,
//    zeroed counters, the strategy's plan) and then the strategy's init phases
//    run on the heap's own non-blocking stream; both finish before the heap is
//    handed out. A creation that fails releases everything it made, and the
//    next launch tries again.
//  - A strategy that manages no arena (`cuda`) gets only a header: its blocks
//    live in CUDA's own heap, whose size is set with cuCtxSetLimit when the
//    heap is created.
//
// Locking: the tables (heaps, size wishes) have one lock that is never held
// across a driver call that waits for the device. Each heap has its own
// mutex, held while it is created or reset and while its counters are read,
// so a slow or blocked context holds up only the threads that need its heap.
//
// After fork() the child starts with empty tables and fresh locks (its CUDA
// state is not the parent's): it gets new heaps if it initialises CUDA again.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <cuda.h>

#include "gpualloc/heap.h"
#include "gpualloc/registry.h"
#include "gpualloc/walks.h"

namespace gpualloc::interpose {

struct context_heap {
  std::mutex busy;  // held while the heap is created, reset or read
  bool ready = false;

  CUcontext ctx = nullptr;
  unsigned long long ctx_id = 0;  // cuCtxGetId
  CUdevice device = 0;
  strategy_id strategy{};
  std::uint32_t flags = 0;            // heap_flags
  CUdeviceptr header = 0;             // device address of the heap_header
  std::uint64_t bytes = 0;            // our allocation (the header's heap_bytes)
  std::uint64_t cuda_heap_bytes = 0;  // a strategy without an arena: CUDA's heap limit
  CUstream stream = nullptr;          // libgpualloc's own non-blocking stream in ctx
  CUmodule init_module = nullptr;     // the embedded init kernels, loaded on first need
  CUfunction init_kernel = nullptr;
  CUfunction walk_kernel = nullptr;   // checked mode's walks (walks.h)
  std::atomic<std::uint64_t> errors_reported{0};  // checked mode: errors already reported

  checked_region checks{};            // checked mode: where the heap's region lies (device addresses)

  // Checked mode: the kernels named in the heap's kernel_names so far (by
  // slot, slot 0 unused) and their slots; emptied with the heap's region.
  std::mutex names_lock;
  std::unordered_map<CUfunction, std::uint32_t> kernel_slots;
  std::vector<std::string> kernel_names;

  // Bytes the statistics table shows: our heap, or CUDA's for `cuda`.
  std::uint64_t shown_bytes() const;
};

using heap_ref = std::shared_ptr<context_heap>;

// The context's id, the key of every table (the pointer value where the
// driver has no cuCtxGetId).
unsigned long long context_key(CUcontext ctx);

// The heap of ctx, or null.
heap_ref find_heap(CUcontext ctx);

// The heap of ctx, created if needed. ctx must be current. On failure a
// message (with bytes tried and free) is printed and the error returned.
CUresult ensure_heap(CUcontext ctx, heap_ref* out);

// Rewrites the header (counters zeroed) and re-runs the strategy's init.
// Synchronises the context first (the program asked: gpualloc_reset).
CUresult reset_heap(context_heap& heap);

// The heap's counters: after the context's work (whole_context), or after
// the work queued so far on `stream`.
CUresult read_counters(context_heap& heap, heap_counters* out, bool whole_context, CUstream stream = nullptr);

// Checked mode: runs walk `task` over the heap (walks.h) once the work
// queued so far on `after` is done, and copies its result into *out (when
// not null). `threshold`: the listing's smallest size.
CUresult walk_heap(context_heap& heap, checked::walk task, CUstream after, std::uint64_t threshold,
                   checked::walk_result* out);

// Checked mode: queues a sweep (walks.h) on `stream` without waiting: for
// a stream being captured, whose kernels run later, as part of a graph.
CUresult queue_sweep(context_heap& heap, CUstream stream);

// Checked mode: a sweep as a kernel node of `graph` after node `after` (a
// kernel node the program added by hand); the new node in *sweep.
CUresult add_sweep_node(context_heap& heap, CUgraph graph, CUgraphNode after, CUgraphNode* sweep);

// Forgets a context (by its key) before it is destroyed: collects its statistics (when enabled;
// `known`: counters already read, else they are read now) and drops its heap
// and its size wish.
void retire_context(unsigned long long context_key, const heap_counters* known);

// The program's cudaDeviceSetLimit(cudaLimitMallocHeapSize) for ctx, honoured
// when the heap is created (GPUALLOC_HEAP_SIZE wins over it). False, with a
// message, for a size no heap can have.
bool set_heap_wish(CUcontext ctx, std::uint64_t bytes);

// Whether ctx has a wish.
bool has_heap_wish(CUcontext ctx);

// The size a heap of ctx has, or would have if created now (ctx current).
std::uint64_t heap_size_for_limit(CUcontext ctx);

// Every live heap (a snapshot).
std::vector<heap_ref> all_heaps();

}  // namespace gpualloc::interpose
