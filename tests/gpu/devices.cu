// Every GPU of the machine gets its own heap: kernels on all devices allocate
// at the same time, each device's blocks stay intact, and each device
// reports (cudaDeviceGetLimit) the heap size GPUALLOC_HEAP_SIZE asked for,
// given again as the argument. With one GPU this is a single-device run.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_HEAP_SIZE=256M %for-each-strategy -- %gpu-bin/devices 268435456
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "Inputs/check.h"

__global__ void fill(int** slots, int device) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int* p = static_cast<int*>(malloc(16 * sizeof(int)));
  if (p != nullptr)
    for (int i = 0; i < 16; ++i) p[i] = device * 1000003 + t + i;
  slots[t] = p;
}

__global__ void check_and_free(int** slots, int device, unsigned* bad) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int* p = slots[t];
  if (p == nullptr) {
    atomicAdd(bad, 1u);
    return;
  }
  for (int i = 0; i < 16; ++i)
    if (p[i] != device * 1000003 + t + i) {
      atomicAdd(bad, 1u);
      break;
    }
  free(p);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: devices <expected heap bytes per device>\n");
    return 2;
  }
  const size_t expected_heap = std::strtoull(argv[1], nullptr, 0);
  int devices = 0;
  CHECK(cudaGetDeviceCount(&devices));
  const int threads = 1 << 16, block = 256;
  std::vector<int**> slots(devices);
  std::vector<unsigned*> bad(devices);
  for (int round = 0; round < 2; ++round) {
    for (int d = 0; d < devices; ++d) {  // launch everywhere before waiting anywhere
      CHECK(cudaSetDevice(d));
      if (round == 0) {
        CHECK(cudaMalloc(&slots[d], threads * sizeof(int*)));
        CHECK(cudaMallocManaged(&bad[d], sizeof(unsigned)));
      }
      *bad[d] = 0;
      fill<<<threads / block, block>>>(slots[d], d);
      check_and_free<<<threads / block, block>>>(slots[d], d, bad[d]);
      CHECK(cudaGetLastError());
    }
    for (int d = 0; d < devices; ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaDeviceSynchronize());
      EXPECT(*bad[d] == 0, "device %d round %d: %u threads lost their block", d, round, *bad[d]);
    }
  }
  for (int d = 0; d < devices; ++d) {
    size_t heap = 0;
    CHECK(cudaSetDevice(d));
    CHECK(cudaDeviceGetLimit(&heap, cudaLimitMallocHeapSize));
    std::printf("device %d: heap %zu bytes\n", d, heap);
    EXPECT(heap == expected_heap, "device %d reports a heap of %zu bytes, GPUALLOC_HEAP_SIZE asked for %zu", d, heap,
           expected_heap);
  }
  std::printf("devices: ok on %d device(s)\n", devices);
  return 0;
}
