#include <cstdio>
__global__ void kernel(int** out) { out[threadIdx.x] = static_cast<int*>(malloc(sizeof(int))); }
int main() {
  int** out;
  cudaMalloc(&out, 32 * sizeof(int*));
  kernel<<<1, 32>>>(out);
  std::printf("%d\n", static_cast<int>(cudaDeviceSynchronize()));
}
