// REQUIRES: clang
// Plain clang cannot build this: without <new> clang leaves operator new and
// delete undefined in device code and ptxas rejects the module.
// RUN: not %clangxx --cuda-path=%cuda-path -Wno-unknown-cuda-version --offload-arch=%arch \
// RUN:   --cuda-device-only -c %s -o %t.plain.o 2>&1 | FileCheck %s --check-prefix=PLAIN
// gpualloc-clang++ can, at -O0 and -O2 (-c runs ptxas: every symbol resolves):
// RUN: %gpualloc-clangxx -O0 --cuda-device-only -c %s -o %t.O0.o
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -c %s -o %t.O2.o
// RUN: %gpualloc-clangxx -O0 --cuda-device-only -S %s -o - | FileCheck %s

// PLAIN: ptxas{{.*}}Unresolved extern function '_Znwm'

__global__ void kernel(int** out) {
  int* p = new int(7);
  int* a = new int[threadIdx.x + 1];
  a[0] = *p;
  out[threadIdx.x] = a;
  delete p;
  if (threadIdx.x == 0) delete[] out[1];
}

// CHECK-NOT: _Zn
// CHECK-NOT: _Zd
// CHECK-LABEL: .entry _Z6kernelPPi(
// CHECK: call.uni (retval0), __gpualloc_malloc,
// CHECK: call.uni (retval0), __gpualloc_malloc,
// CHECK: call.uni __gpualloc_free,
// CHECK: call.uni __gpualloc_free,
// CHECK-NOT: _Zn
// CHECK-NOT: _Zd
