// Second translation unit of two_tu: frees what the first one allocated, so
// two device modules (or two objects of one -fgpu-rdc module) share one heap.
#include "check.h"

#ifdef SHARED_DEVICE_CODE
// With -fgpu-rdc the first unit calls this device function directly.
__device__ int* make_counters(int n) {
  int* c = static_cast<int*>(malloc(n * sizeof(int)));
  if (c != nullptr)
    for (int i = 0; i < n; ++i) c[i] = i;
  return c;
}
#endif

__global__ void release(int** arrays, int n, long long* sums) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  long long sum = 0;
  if (arrays[tid] != nullptr)
    for (int i = 0; i < n + tid % 5; ++i) sum += arrays[tid][i];  // two_tu.cu allocated n + tid % 5
  free(arrays[tid]);
  sums[tid] = sum;
}

void launch_release(int** arrays, int n, long long* sums, int threads) {
  release<<<threads / 128, 128>>>(arrays, n, sums);
  CHECK(cudaGetLastError());
}
