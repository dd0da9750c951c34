// REQUIRES: clang
// Device code has no exceptions: gpualloc's `new` returns NULL when the heap
// is full, and a program's NULL check after `new` must survive optimisation
// (plain clang marks the result of `new` nonnull and deletes the check).
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o - | FileCheck %s
// CHECK: .entry {{.*}}allocate_or_flag
// CHECK: 12345

__global__ void allocate_or_flag(int** out, int* flag, int n) {
  int* p = new int[n];
  if (p == nullptr) {
    *flag = 12345;
    return;
  }
  p[0] = 1;
  *out = p;
}
