// A driver-API program: it loads a cubin built by gpualloc-clang++ with
// cuModuleLoad and launches its kernels with cuLaunchKernel, twice, with an
// unload in between (the reloaded module must get its heap again).
//
// REQUIRES: cuda-gpu
// RUN: %for-each-strategy -- %gpu-bin/driver_module %gpu-bin/module_kernels.cubin
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "Inputs/driver_check.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: driver_module <cubin>\n");
    return 2;
  }
  const int threads = 4096, block = 128;
  CUdevice device;
  CUcontext context;
  DRIVER_CHECK(cuInit(0));
  DRIVER_CHECK(cuDeviceGet(&device, 0));
  DRIVER_CHECK(cuDevicePrimaryCtxRetain(&context, device));
  DRIVER_CHECK(cuCtxSetCurrent(context));
  CUdeviceptr slots, sums;
  DRIVER_CHECK(cuMemAlloc(&slots, threads * sizeof(void*)));
  DRIVER_CHECK(cuMemAlloc(&sums, threads * sizeof(long long)));
  std::vector<long long> host(threads);

  for (int load = 0; load < 2; ++load) {
    CUmodule module;
    CUfunction fill, release;
    DRIVER_CHECK(cuModuleLoad(&module, argv[1]));
    DRIVER_CHECK(cuModuleGetFunction(&fill, module, "fill"));
    DRIVER_CHECK(cuModuleGetFunction(&release, module, "release"));
    void* fill_args[] = {&slots};
    void* release_args[] = {&slots, &sums};
    DRIVER_CHECK(cuLaunchKernel(fill, threads / block, 1, 1, block, 1, 1, 0, nullptr, fill_args, nullptr));
    DRIVER_CHECK(cuLaunchKernel(release, threads / block, 1, 1, block, 1, 1, 0, nullptr, release_args, nullptr));
    DRIVER_CHECK(cuCtxSynchronize());
    DRIVER_CHECK(cuMemcpyDtoH(host.data(), sums, threads * sizeof(long long)));
    for (int t = 0; t < threads; ++t)
      if (host[t] != 4ll * t + 6) {
        std::fprintf(stderr, "load %d thread %d: sum %lld\n", load, t, host[t]);
        return 1;
      }
    DRIVER_CHECK(cuModuleUnload(module));
  }
  DRIVER_CHECK(cuMemFree(slots));
  DRIVER_CHECK(cuMemFree(sums));
  DRIVER_CHECK(cuDevicePrimaryCtxRelease(device));
  std::printf("driver_module: ok\n");
  return 0;
}
