// REQUIRES: clang
// RUN: %gpualloc-clangxx -O0 --cuda-device-only -S %s -o %t.O0.ptx
// RUN: FileCheck %s --check-prefix=O0 < %t.O0.ptx
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o %t.O2.ptx
// RUN: FileCheck %s --check-prefix=O2 < %t.O2.ptx
// With a runtime that never calls CUDA's malloc, nothing in the PTX may:
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o %t.stub.ptx --gpualloc-strategy=atomic \
// RUN:   -Xarch_device -mllvm=-gpualloc-runtime-bc=%S/Inputs/stub-runtime.ll
// RUN: FileCheck %s --check-prefix=STUB < %t.stub.ptx

// An unmodified kernel using malloc/free, new/delete and new[]/delete[] (with
// <new>, so clang defines operator new as an inline call to malloc). After
// gpualloc-clang++ no user code calls CUDA's malloc or free at -O0 or -O2.
#include <new>

struct node {
  int value;
  node* next;
};

__global__ void build(node** heads, int n) {
  node* head = nullptr;
  for (int i = 0; i < n; ++i) head = new node{i, head};
  int* scratch = static_cast<int*>(malloc(n * sizeof(int)));
  int* more = new int[n];
  scratch[0] = more[0] = n;
  heads[threadIdx.x] = head;
  heads[threadIdx.x + 32] = reinterpret_cast<node*>(scratch);
  heads[threadIdx.x + 64] = reinterpret_cast<node*>(more);
}

__global__ void destroy(node** heads) {
  for (node* n = heads[threadIdx.x]; n;) {
    node* next = n->next;
    delete n;
    n = next;
  }
  free(heads[threadIdx.x + 32]);
  delete[] reinterpret_cast<int*>(heads[threadIdx.x + 64]);
}

// The kernels call the runtime's entry points, never malloc/free (the
// strategy, chosen at run time, is joined with the module by libgpualloc).
// O0-LABEL: .entry _Z5buildPP4nodei(
// O0-NOT: {{call(\.uni)? (\(retval0\), )?(malloc|free),}}
// O0: call.uni (retval0), __gpualloc_malloc,
// O0-NOT: {{call(\.uni)? (\(retval0\), )?(malloc|free),}}
// O0: {{^}}}
// O0-LABEL: .entry _Z7destroyPP4node(
// O0-NOT: {{call(\.uni)? (\(retval0\), )?(malloc|free),}}
// O0: call.uni __gpualloc_free,
// O0-NOT: {{call(\.uni)? (\(retval0\), )?(malloc|free),}}
// O0: {{^}}}

// O2-LABEL: .entry _Z5buildPP4nodei(
// O2-NOT: {{call(\.uni)? (\(retval0\), )?(malloc|free),}}
// O2: call.uni (retval0), __gpualloc_malloc
// O2-NOT: {{call(\.uni)? (\(retval0\), )?(malloc|free),}}
// O2: {{^}}}
// O2-LABEL: .entry _Z7destroyPP4node(
// O2-NOT: {{call(\.uni)? (\(retval0\), )?(malloc|free),}}
// O2: call.uni __gpualloc_free,
// O2-NOT: {{call(\.uni)? (\(retval0\), )?(malloc|free),}}
// O2: {{^}}}

// Pinned (a stand-in runtime that never calls CUDA's allocator), everything
// is inlined and the kernels read the heap themselves.

// STUB-NOT: {{[^_a-z]}}malloc
// STUB-NOT: {{[^_a-z]}}free
// STUB: .entry _Z5buildPP4nodei(
// STUB: __gpualloc_heap
// STUB-NOT: {{[^_a-z]}}malloc
// STUB-NOT: {{[^_a-z]}}free
