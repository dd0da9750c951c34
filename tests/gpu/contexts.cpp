// Each context has its own heap: two contexts on one device (driver API)
// load the same module and each module instance reads its own context's heap
// (`__gpualloc_heap`, the variable libgpualloc sets, differs); the first
// context's heap is then exhausted and the second must still serve every
// request, while the first says NULL (one shared heap would fail both ways).
// After the exhausted primary context is reset (cuDevicePrimaryCtxReset, as
// cudaDeviceReset does) the next one gets a fresh heap that serves again.
//
// A strategy that never says NULL (reuse `unsafe`, a wrapping bump pointer)
// cannot show a full heap; for it only the heap pointers are compared.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_HEAP_SIZE=64M %for-each-strategy -- %gpu-bin/contexts %gpu-bin/module_kernels.cubin
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "Inputs/driver_check.h"
#include "gpualloc/registry.h"

namespace {

const int threads = 2048, block = 128;
const int ladder_threads = 1024, ladder_per_thread = 128;

struct context_run {
  CUcontext context;
  CUmodule module;
  CUfunction fill, release, exhaust_ladder;
  CUdeviceptr slots, sums, table, counts;
};

void load(context_run& run, const char* cubin) {
  DRIVER_CHECK(cuCtxSetCurrent(run.context));
  DRIVER_CHECK(cuModuleLoad(&run.module, cubin));
  DRIVER_CHECK(cuModuleGetFunction(&run.fill, run.module, "fill"));
  DRIVER_CHECK(cuModuleGetFunction(&run.release, run.module, "release"));
  DRIVER_CHECK(cuModuleGetFunction(&run.exhaust_ladder, run.module, "exhaust_ladder"));
  DRIVER_CHECK(cuMemAlloc(&run.slots, threads * sizeof(void*)));
  DRIVER_CHECK(cuMemAlloc(&run.sums, threads * sizeof(long long)));
  DRIVER_CHECK(cuMemAlloc(&run.table, (size_t)ladder_threads * ladder_per_thread * sizeof(void*)));
  DRIVER_CHECK(cuMemAlloc(&run.counts, 2 * sizeof(unsigned long long)));
}

void fill(context_run& run) {
  DRIVER_CHECK(cuCtxSetCurrent(run.context));
  void* args[] = {&run.slots};
  DRIVER_CHECK(cuLaunchKernel(run.fill, threads / block, 1, 1, block, 1, 1, 0, nullptr, args, nullptr));
  DRIVER_CHECK(cuCtxSynchronize());
}

// The heap the module instance of this context reads (set by libgpualloc
// before the module's first kernel ran).
unsigned long long heap_of(context_run& run) {
  DRIVER_CHECK(cuCtxSetCurrent(run.context));
  CUdeviceptr variable;
  size_t bytes = 0;
  DRIVER_CHECK(cuModuleGetGlobal(&variable, &bytes, run.module, "__gpualloc_heap"));
  if (bytes != sizeof(unsigned long long)) {
    std::fprintf(stderr, "__gpualloc_heap has %zu bytes, expected a pointer\n", bytes);
    std::exit(1);
  }
  unsigned long long heap = 0;
  DRIVER_CHECK(cuMemcpyDtoH(&heap, variable, sizeof heap));
  return heap;
}

// Checks and frees what `fill` got; returns how many threads got NULL.
int release(context_run& run, const char* what) {
  DRIVER_CHECK(cuCtxSetCurrent(run.context));
  void* args[] = {&run.slots, &run.sums};
  DRIVER_CHECK(cuLaunchKernel(run.release, threads / block, 1, 1, block, 1, 1, 0, nullptr, args, nullptr));
  DRIVER_CHECK(cuCtxSynchronize());
  std::vector<long long> sums(threads);
  DRIVER_CHECK(cuMemcpyDtoH(sums.data(), run.sums, threads * sizeof(long long)));
  int nulls = 0;
  for (int t = 0; t < threads; ++t) {
    if (sums[t] == -1) {
      ++nulls;
    } else if (sums[t] != 4ll * t + 6) {
      std::fprintf(stderr, "%s: thread %d: sum %lld, expected %lld (its block was overwritten)\n", what, t, sums[t],
                   4ll * t + 6);
      std::exit(1);
    }
  }
  return nulls;
}

// Takes run's heap until it says NULL for 16-byte requests; returns the blocks taken.
unsigned long long exhaust(context_run& run) {
  DRIVER_CHECK(cuCtxSetCurrent(run.context));
  DRIVER_CHECK(cuMemsetD8(run.counts, 0, 2 * sizeof(unsigned long long)));
  int per_thread = ladder_per_thread;
  void* args[] = {&run.table, &per_thread, &run.counts};
  DRIVER_CHECK(cuLaunchKernel(run.exhaust_ladder, ladder_threads / block, 1, 1, block, 1, 1, 0, nullptr, args, nullptr));
  DRIVER_CHECK(cuCtxSynchronize());
  unsigned long long counts[2];
  DRIVER_CHECK(cuMemcpyDtoH(counts, run.counts, sizeof counts));
  // A first-fit strategy may fill a few threads' tables with small blocks
  // while others already see NULL; every thread filling its table means the
  // heap never ran out.
  if (counts[1] == static_cast<unsigned long long>(ladder_threads)) {
    std::fprintf(stderr, "exhausting the primary context: all %d threads filled their table of %d blocks without a "
                 "NULL (%llu blocks taken): the heap is larger than GPUALLOC_HEAP_SIZE=64M?\n",
                 ladder_threads, ladder_per_thread, counts[0]);
    std::exit(1);
  }
  return counts[0];
}

void expect_served(int nulls, const char* what) {
  if (nulls != 0) {
    std::fprintf(stderr, "%s: %d of %d threads got NULL for 16 bytes\n", what, nulls, threads);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: contexts <cubin>\n");
    return 2;
  }
  const char* name = std::getenv("GPUALLOC_STRATEGY");
  const gpualloc::strategy_info* strategy =
      name ? gpualloc::find_strategy(name) : &gpualloc::strategy(gpualloc::default_strategy);
  if (strategy == nullptr) {
    std::fprintf(stderr, "GPUALLOC_STRATEGY=%s is not registered\n", name);
    return 1;
  }
  const bool says_null = strategy->reuse != gpualloc::reuse_policy::unsafe;
  CUdevice device;
  DRIVER_CHECK(cuInit(0));
  DRIVER_CHECK(cuDeviceGet(&device, 0));

  // Two contexts at once: the primary one and one of our own.
  context_run primary{}, own{};
  DRIVER_CHECK(cuDevicePrimaryCtxRetain(&primary.context, device));
  DRIVER_CHECK(cuCtxCreate(&own.context, nullptr, 0, device));
  load(primary, argv[1]);
  load(own, argv[1]);
  fill(primary);
  fill(own);  // both hold live blocks now
  const unsigned long long primary_heap = heap_of(primary), own_heap = heap_of(own);
  std::printf("contexts: heaps at %#llx (primary) and %#llx (second context)\n", primary_heap, own_heap);
  if (primary_heap == 0 || own_heap == 0 || primary_heap == own_heap) {
    std::fprintf(stderr, "the two contexts' modules read heaps %#llx and %#llx: %s\n", primary_heap, own_heap,
                 primary_heap == own_heap ? "one heap for two contexts" : "a module without a heap");
    return 1;
  }
  expect_served(release(primary, "primary context"), "primary context");
  expect_served(release(own, "second context"), "second context");

  if (says_null) {
    // Fill the primary context's heap; the second context must not notice.
    unsigned long long taken = exhaust(primary);
    fill(primary);
    fill(own);
    int primary_nulls = release(primary, "exhausted primary context");
    int own_nulls = release(own, "second context beside an exhausted one");
    std::printf("contexts: primary heap exhausted with %llu blocks: then %d of %d requests there got NULL, %d in the "
                "second context\n", taken, primary_nulls, threads, own_nulls);
    if (primary_nulls == 0) {
      std::fprintf(stderr, "the primary context's heap still served all %d requests after the ladder took %llu blocks "
                   "and saw NULL for 16 bytes: NULL while memory was free\n", threads, taken);
      return 1;
    }
    expect_served(own_nulls, "second context while the primary context's heap is full");
  } else {
    std::printf("contexts: %.*s never says NULL: heaps compared by address only\n", (int)strategy->name.size(),
                strategy->name.data());
  }
  DRIVER_CHECK(cuCtxDestroy(own.context));

  // Reset the primary context (its heap still full); the next one must get a
  // fresh heap of its own.
  DRIVER_CHECK(cuDevicePrimaryCtxRelease(device));
  DRIVER_CHECK(cuDevicePrimaryCtxReset(device));
  context_run again{};
  DRIVER_CHECK(cuDevicePrimaryCtxRetain(&again.context, device));
  load(again, argv[1]);
  fill(again);
  if (heap_of(again) == 0) {
    std::fprintf(stderr, "after the reset the module reads no heap\n");
    return 1;
  }
  expect_served(release(again, "primary context after reset"), "primary context after reset (its old heap was full)");
  DRIVER_CHECK(cuDevicePrimaryCtxRelease(device));
  std::printf("contexts: ok\n");
  return 0;
}
