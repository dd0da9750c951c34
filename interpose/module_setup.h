// Preparing kernels before they run: each module that carries the gpualloc
// runtime gets its `__gpualloc_heap` variable pointed at its context's heap
// before its first kernel runs in that context.
//
// Invariants:
//  - A (context id, function handle) pair is looked up once; after that a
//    launch costs one lock and one hash lookup (the hot path). The lock guards
//    the caches only: no device wait happens under it.
//  - A (context, module) pair is written once. Unloading any module or library
//    clears both caches (handles may be reused); retiring a context drops its
//    entries.
//  - Writes go through libgpualloc's own non-blocking stream in relaxed
//    capture mode, so they are legal while the program captures a graph.
#pragma once

#include <cuda.h>

#include <string>

#include "context_heaps.h"

namespace gpualloc::interpose {

// What a launch needs to know after it was enqueued (checked mode).
struct launch_info {
  CUcontext ctx = nullptr;        // the context the launch went to
  bool checked = false;           // the module has the runtime and the heap is in checked mode
  CUfunction function = nullptr;  // the CUfunction (resolved from a CUkernel), for its name
};

// Before a launch of `f` (a CUfunction or a CUkernel) in the current context.
// Returns the error of heap creation, if any; other lookup failures are left
// to the real launch to report.
CUresult prepare_launch(CUfunction f, launch_info* info);

// A function's name as the driver tells it ("?" if it does not).
std::string name_of(CUfunction function);

// Prepares every kernel node of `graph`, recursing into child graphs.
CUresult prepare_graph(CUgraph graph);

// Prepares one kernel node given by its parameters (func, or kern in ctx);
// *info (when not null) as prepare_launch's.
CUresult prepare_kernel_node(CUfunction func, CUkernel kern, CUcontext ctx, launch_info* info = nullptr);

// cuModuleUnload / cuLibraryUnload: clear the caches.
void forget_modules();

// Drops a context's cache entries (by its key) before it goes away.
void forget_context_modules(unsigned long long context_key);

// A conditional node's body graphs, as cuGraphAddNode returned them: CUDA 13
// has no call that lists them later, and prepare_graph must reach them.
void remember_conditional_bodies(CUgraphNode node, const CUgraph* bodies, unsigned count);

}  // namespace gpualloc::interpose
