// Two translation units: this one allocates, Inputs/two_tu_lib.cu frees.
// Built twice: as two separate device modules, and with -fgpu-rdc as one
// module where this unit's kernel calls a device function of the other.
//
// REQUIRES: cuda-gpu
// RUN: %for-each-strategy -- %gpu-bin/two_tu
// RUN: %for-each-strategy -- %gpu-bin/two_tu_rdc
#include <cstdio>
#include <vector>

#include "Inputs/check.h"

#ifdef SHARED_DEVICE_CODE
__device__ int* make_counters(int n);
#else
__device__ int* make_counters(int n) {
  int* c = new int[n];
  if (c != nullptr)
    for (int i = 0; i < n; ++i) c[i] = i;
  return c;
}
#endif

void launch_release(int** arrays, int n, long long* sums, int threads);

__global__ void allocate(int** arrays, int n) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  arrays[tid] = make_counters(n + tid % 5);
}

int main() {
  const int threads = 1 << 14, n = 20;
  int** arrays;
  long long* sums;
  CHECK(cudaMalloc(&arrays, threads * sizeof(int*)));
  CHECK(cudaMalloc(&sums, threads * sizeof(long long)));
  std::vector<long long> host(threads);
  for (int round = 0; round < 3; ++round) {
    allocate<<<threads / 128, 128>>>(arrays, n);
    CHECK(cudaGetLastError());
    launch_release(arrays, n, sums, threads);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(host.data(), sums, threads * sizeof(long long), cudaMemcpyDeviceToHost));
    for (int t = 0; t < threads; ++t) {
      long long m = n + t % 5;
      EXPECT(host[t] == m * (m - 1) / 2, "round %d thread %d: sum %lld", round, t, host[t]);
    }
  }
  std::printf("two_tu: ok\n");
  return 0;
}
