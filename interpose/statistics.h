// Statistics at exit (GPUALLOC_STATS=1): one table row per context.
//
// Contexts destroyed before exit leave their counters here (retire_context);
// live contexts are read at exit by a handler registered at the first heap
// creation, so that it runs before cudart's own teardown (atexit is LIFO).
#pragma once

#include "context_heaps.h"

namespace gpualloc::interpose {

// Registers the exit report (once).
void register_exit_report();

// Keeps the last counters of a context that goes away.
void remember_retired(const context_heap& heap, const heap_counters& counters);

}  // namespace gpualloc::interpose
