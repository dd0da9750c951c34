// Kernel in one translation unit, the device function that allocates in
// another (with -fgpu-rdc), or a kernel allocating in each (without).
#include <cstdio>

#ifdef RDC
__device__ int* make_value(int v);
#else
__global__ void other_kernel(int** out);
#endif

__global__ void main_kernel(int** out) {
#ifdef RDC
  out[threadIdx.x] = make_value(threadIdx.x);
#else
  out[threadIdx.x] = new int(threadIdx.x);
#endif
}

int main() {
  int** out;
  cudaMalloc(&out, 32 * sizeof(int*));
  main_kernel<<<1, 32>>>(out);
#ifndef RDC
  other_kernel<<<1, 32>>>(out);
#endif
  printf("%d\n", static_cast<int>(cudaDeviceSynchronize()));
  return 0;
}
