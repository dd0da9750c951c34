// REQUIRES: clang
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o - --gpualloc-strategy=atomic \
// RUN:   -Xarch_device -mllvm=-gpualloc-runtime-bc=%S/Inputs/stub-runtime.ll | FileCheck %s
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o - \
// RUN:   -Xarch_device -mllvm=-gpualloc-runtime-bc=%S/Inputs/stub-runtime.ll | FileCheck %s --check-prefix=UNPINNED
// RUN: not %gpualloc-clangxx -O2 --cuda-device-only -S %s -o /dev/null --gpualloc-strategy=no-such \
// RUN:   -Xarch_device -mllvm=-gpualloc-runtime-bc=%S/Inputs/stub-runtime.ll 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// A compile and link in one command: the option reaches the device compile
// only (the host compile and the link do not know it).
// RUN: %gpualloc-clangxx --gpualloc-verbose -### %s -o %t --gpualloc-strategy=atomic 2>&1 | FileCheck %s --check-prefix=DRIVER

// gpualloc-clang++ --gpualloc-strategy=NAME reaches the pass, which pins the
// strategy in the device code (here with the stand-in runtime of
// Inputs/stub-runtime.ll, whose allocation adds the pin to its offset: the
// optimizer folds it to the constant). An unknown name is a compile error.

__global__ void kernel(int** out) { out[threadIdx.x] = new int(1); }

// CHECK: .weak .global .align 4 .u32 __gpualloc_pinned_strategy = {{[0-9]+}};
// CHECK-LABEL: .entry _Z6kernelPPi(
// CHECK-NOT: __gpualloc_pinned_strategy
// CHECK: {{^}}}
// UNPINNED: .weak .global .align 4 .u32 __gpualloc_pinned_strategy = -1;
// UNKNOWN: error: gpualloc: unknown strategy 'no-such' (valid: cuda, atomic
// DRIVER: clang++ {{.*}}-Xarch_device -mllvm=-gpualloc-strategy=atomic
// DRIVER-NOT: gpualloc-strategy
// DRIVER: "-cc1" "-triple" "nvptx64-nvidia-cuda"{{.*}} "-mllvm" "-gpualloc-strategy=atomic"
// DRIVER-NOT: gpualloc-strategy
