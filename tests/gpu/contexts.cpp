// Each context has its own heap: two contexts on one device (driver API)
// allocate from different heaps at the same time, a module loaded in both
// gets each context's heap, and after the primary context is reset
// (cuDevicePrimaryCtxReset, as cudaDeviceReset does) the next one gets a
// fresh heap.
//
// REQUIRES: cuda-gpu
// RUN: %for-each-strategy -- %gpu-bin/contexts %gpu-bin/module_kernels.cubin
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "Inputs/driver_check.h"

namespace {

const int threads = 2048, block = 128;

struct context_run {
  CUcontext context;
  CUmodule module;
  CUfunction fill, release;
  CUdeviceptr slots, sums;
};

void load(context_run& run, const char* cubin) {
  DRIVER_CHECK(cuCtxSetCurrent(run.context));
  DRIVER_CHECK(cuModuleLoad(&run.module, cubin));
  DRIVER_CHECK(cuModuleGetFunction(&run.fill, run.module, "fill"));
  DRIVER_CHECK(cuModuleGetFunction(&run.release, run.module, "release"));
  DRIVER_CHECK(cuMemAlloc(&run.slots, threads * sizeof(void*)));
  DRIVER_CHECK(cuMemAlloc(&run.sums, threads * sizeof(long long)));
}

void fill(context_run& run) {
  DRIVER_CHECK(cuCtxSetCurrent(run.context));
  void* args[] = {&run.slots};
  DRIVER_CHECK(cuLaunchKernel(run.fill, threads / block, 1, 1, block, 1, 1, 0, nullptr, args, nullptr));
  DRIVER_CHECK(cuCtxSynchronize());
}

// The lowest address any thread got, after checking and freeing everything.
unsigned long long release(context_run& run, const char* what) {
  DRIVER_CHECK(cuCtxSetCurrent(run.context));
  std::vector<unsigned long long> pointers(threads);
  DRIVER_CHECK(cuMemcpyDtoH(pointers.data(), run.slots, threads * sizeof(void*)));
  void* args[] = {&run.slots, &run.sums};
  DRIVER_CHECK(cuLaunchKernel(run.release, threads / block, 1, 1, block, 1, 1, 0, nullptr, args, nullptr));
  DRIVER_CHECK(cuCtxSynchronize());
  std::vector<long long> sums(threads);
  DRIVER_CHECK(cuMemcpyDtoH(sums.data(), run.sums, threads * sizeof(long long)));
  unsigned long long lowest = ~0ull;
  for (int t = 0; t < threads; ++t) {
    if (sums[t] != 4ll * t + 6) {
      std::fprintf(stderr, "%s: thread %d: sum %lld\n", what, t, sums[t]);
      std::exit(1);
    }
    if (pointers[t] < lowest) lowest = pointers[t];
  }
  return lowest;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: contexts <cubin>\n");
    return 2;
  }
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
  unsigned long long a = release(primary, "primary context");
  unsigned long long b = release(own, "second context");
  if (a == b) {
    std::fprintf(stderr, "both contexts handed out %#llx: one heap for two contexts\n", a);
    return 1;
  }
  DRIVER_CHECK(cuCtxDestroy(own.context));

  // Reset the primary context; the next one must get a working heap of its own.
  DRIVER_CHECK(cuDevicePrimaryCtxRelease(device));
  DRIVER_CHECK(cuDevicePrimaryCtxReset(device));
  context_run again{};
  DRIVER_CHECK(cuDevicePrimaryCtxRetain(&again.context, device));
  load(again, argv[1]);
  fill(again);
  release(again, "primary context after reset");
  DRIVER_CHECK(cuDevicePrimaryCtxRelease(device));
  std::printf("contexts: ok\n");
  return 0;
}
