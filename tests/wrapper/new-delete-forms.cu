// REQUIRES: clang
// RUN: %gpualloc-clangxx -std=c++20 -O0 --cuda-device-only -S %s -o - | FileCheck %s
// RUN: %gpualloc-clangxx -std=c++20 -O2 --cuda-device-only -c %s -o %t.o

// Sized, aligned (std::align_val_t, which CUDA does not provide for the
// device at all) and nothrow new/delete, as clang emits them for a kernel
// that includes <new>. Each reaches the matching runtime entry point, with
// the alignment where there is one.
#include <new>

struct alignas(128) line {
  int words[32];
};

__global__ void kernel(int** ints, line** lines) {
  int* sized = new int(1);                       // operator new(size_t)
  line* aligned = new line;                      // operator new(size_t, align_val_t)
  line* aligned_array = new line[2];             // operator new[](size_t, align_val_t)
  int* nothrow = new (std::nothrow_t{}) int(3);  // operator new(size_t, const nothrow_t&)
  ints[0] = sized;
  ints[1] = nothrow;
  lines[0] = aligned;
  lines[1] = aligned_array;
  __syncthreads();
  delete ints[2];      // sized operator delete(void*, size_t)
  delete lines[2];     // operator delete(void*, size_t, align_val_t)
  delete[] lines[3];   // operator delete[](void*, align_val_t)
}

// CHECK-LABEL: .entry _Z6kernelPPiPP4line(
// CHECK: call.uni (retval0), __gpualloc_malloc,
// CHECK: call.uni (retval0), __gpualloc_malloc_aligned,
// CHECK: call.uni (retval0), __gpualloc_malloc_aligned,
// CHECK: call.uni (retval0), __gpualloc_malloc,
// CHECK: call.uni __gpualloc_free,
// CHECK: call.uni __gpualloc_free_aligned,
// CHECK: call.uni __gpualloc_free_aligned,
// CHECK: {{^}}}
// CHECK-NOT: {{_Znw|_Zna|_Zdl|_Zda}}
