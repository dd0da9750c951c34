#include <cstdio>
__device__ int* make_value(int v);
int host_helper();
__global__ void kernel(int** out) { out[threadIdx.x] = make_value(threadIdx.x); }
int main() {
  int** out;
  cudaMalloc(&out, 32 * sizeof(int*));
  kernel<<<1, 32>>>(out);
  std::printf("%d\n", static_cast<int>(cudaDeviceSynchronize()) + host_helper());
}
