// Device code loaded at run time through the driver API (driver_module.cpp).
extern "C" __global__ void fill(int** slots) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int* p = static_cast<int*>(malloc(4 * sizeof(int)));
  if (p != nullptr)
    for (int i = 0; i < 4; ++i) p[i] = t + i;
  slots[t] = p;
}

extern "C" __global__ void release(int** slots, long long* sums) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  long long sum = -1;
  if (int* p = slots[t]) {
    sum = p[0] + p[1] + p[2] + p[3];
    free(p);
  }
  sums[t] = sum;
}
