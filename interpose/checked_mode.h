// Checked mode's host side (GPUALLOC_CHECK=1; the device side is
// runtime/include/gpualloc/checked.h and its neighbours):
//  - before each launch of a kernel that can allocate, the heap learns which
//    kernel runs (its name written once into the heap's kernel names, its
//    slot stamped on the launch's stream), so reports name the kernels that
//    allocated and freed a block;
//  - after it, the sweep (walks.h) checks every live and quarantined block,
//    and new errors are summed up with the kernel's name;
//  - when a context goes away or the program exits, live blocks are counted
//    (statistics or checked mode) and, in checked mode, the largest listed.
//
// A launch into a stream that is being captured gets its stamp and its
// sweep as nodes of the graph (a memset before it, the sweep kernel after
// it), so each run of the graph names and sweeps it too; only the host's
// summary line is missing there. A kernel node added to a graph by hand
// gets the same two nodes (add_kernel_node), except one added with edge
// data (cuGraphAddNode_v2), whose edges belong to its own dependencies, and
// one whose function a later call changes (it keeps its first stamp).
// Kernels launched by several host threads at once, or by branches of a
// graph that run side by side, may see each other's stamp.
#pragma once

#include <cuda.h>

#include <functional>

#include "context_heaps.h"
#include "module_setup.h"

namespace gpualloc::interpose {

// Before a launch enqueued on `stream` (per_thread: a _ptsz variant).
void before_launch(const launch_info& info, CUstream stream, bool per_thread);

// After it: waits for the launch's stream, sweeps and reports.
void after_launch(const launch_info& info, CUstream stream, bool per_thread);

// A kernel node that the program adds to `graph` by hand: `add(deps,
// count)` adds it after those dependencies into *node. In checked mode (per
// info) it goes after a stamp node (a memset of the heap's kernel slot,
// after the node's own dependencies), and a sweep node goes after it.
CUresult add_kernel_node(const launch_info& info, CUgraph graph, const CUgraphNode* deps, size_t count,
                         CUgraphNode* node, const std::function<CUresult(const CUgraphNode*, size_t)>& add);

// The live blocks of h (counters: its counters now), when `when` happens
// ("context 3 goes away", "the program exits"): counted, and the largest
// listed in checked mode. Nothing when every block was freed.
void report_leaks(context_heap& h, const heap_counters& counters, const char* when);

}  // namespace gpualloc::interpose
