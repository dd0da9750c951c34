// Checked mode reports a double free and a foreign free, ignores them, and
// the heap keeps working.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_CHECK=1 %for-each-strategy -- %gpu-bin/double_free
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_STRATEGY=atomic %gpu-bin/double_free 2>&1 | FileCheck %s --check-prefix=REPORT
// REPORT-DAG: gpualloc: double free of 0x{{[0-9a-f]+}} by block (0,0,0) thread (5,0,0)
// REPORT-DAG: gpualloc: free of a pointer this heap never handed out
// REPORT: double_free: ok
#include <cstdio>

#include "Inputs/check.h"

__device__ int a_device_variable;

__global__ void misuse(int* result) {
  if (threadIdx.x != 5) return;
  int* p = static_cast<int*>(malloc(32));
  p[0] = 7;
  free(p);
  free(p);                   // double free: reported and ignored
  free(&a_device_variable);  // never came from the heap: reported and ignored
  int* q = static_cast<int*>(malloc(32));
  *result = q != nullptr;
  free(q);
}

int main() {
  int* result;
  CHECK(cudaMallocManaged(&result, sizeof(int)));
  *result = 0;
  misuse<<<1, 32>>>(result);
  SYNC_CHECK();
  EXPECT(*result == 1, "the heap stopped working after a bad free");
  std::printf("double_free: ok\n");
  return 0;
}
