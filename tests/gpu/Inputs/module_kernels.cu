// Device code loaded at run time through the driver API (driver_module.cpp,
// contexts.cpp).
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

// Takes the heap until it says NULL, from large blocks down to the 16 bytes
// that `fill` asks for: each thread keeps taking one size until NULL, then
// the next smaller. A NULL for the last size is retried a few times, so a
// NULL that lock contention alone caused does not end the run. At most
// `per_thread` blocks per thread go into table (the rest stay NULL);
// counts[0] gets the blocks taken, counts[1] the threads whose table filled
// up before the heap did. (contexts.cpp leaves the blocks to the context's end.)
extern "C" __global__ void exhaust_ladder(void** table, int per_thread, unsigned long long* counts) {
  const unsigned long long sizes[] = {64 << 10, 4 << 10, 256, 16};
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  void** mine = table + (unsigned long long)t * per_thread;
  int taken = 0, retries = 0;
  for (unsigned long long bytes : sizes) {
    while (taken < per_thread) {
      void* p = malloc(bytes);
      if (p == nullptr) {
        if (bytes == 16 && ++retries <= 3) continue;
        break;
      }
      *static_cast<int*>(p) = t;
      mine[taken++] = p;
    }
  }
  for (int i = taken; i < per_thread; ++i) mine[i] = nullptr;
  atomicAdd(&counts[0], (unsigned long long)taken);
  if (taken == per_thread) atomicAdd(&counts[1], 1ull);
}
