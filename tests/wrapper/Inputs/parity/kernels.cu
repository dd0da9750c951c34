// Call sites of every kind, for the register-parity test: a size every lane
// shares (the same-size entry), a size per lane (the general entry), new and
// delete, aligned new, and free in another kernel.
#include <new>

struct alignas(64) wide {
  float v[16];
};

__global__ void uniform_size(void** out, unsigned long size) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = malloc(size);
}

__global__ void per_lane_size(void** out) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = malloc(16 + (t % 7) * 48);
}

__global__ void objects(int** out, wide** wides) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = new int[t % 5 + 1];
  wides[t] = new wide{};
}

__global__ void release(void** blocks, int** arrays, wide** wides) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  free(blocks[t]);
  delete[] arrays[t];
  delete wides[t];
}
