// REQUIRES: clang
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o - --gpualloc-strategy=atomic \
// RUN:   -Xarch_device -mllvm=-gpualloc-runtime-bc=%S/Inputs/stub-runtime.ll | FileCheck %s
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o - | FileCheck %s --check-prefix=UNPINNED
// RUN: not %gpualloc-clangxx -O2 --cuda-device-only -S %s -o /dev/null --gpualloc-strategy=no-such 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNKNOWN
// A compile and link in one command: the option reaches the device compile
// only (the host compile and the link do not know it).
// RUN: %gpualloc-clangxx --gpualloc-verbose -### %s -o %t --gpualloc-strategy=atomic 2>&1 | FileCheck %s --check-prefix=DRIVER

// gpualloc-clang++ --gpualloc-strategy=NAME reaches the pass, which links
// NAME's runtime (here the stand-in of Inputs/stub-runtime.ll) into the
// device code and inlines it, with the pin marker libgpualloc checks.
// Without it, the kernel calls the runtime's entry points, left external for
// libgpualloc to resolve at load time. An unknown name is a compile error.

__global__ void kernel(int** out) { out[threadIdx.x] = new int(1); }

// CHECK: .weak .const .align 4 .u32 __gpualloc_pin_atomic = 1;
// CHECK-LABEL: .entry _Z6kernelPPi(
// CHECK-NOT: call
// CHECK: {{^}}}
// UNPINNED-NOT: __gpualloc_pin
// UNPINNED: .extern .func (.param .b64 func_retval0) __gpualloc_malloc_same_size
// UNPINNED-LABEL: .entry _Z6kernelPPi(
// UNPINNED: call.uni (retval0), __gpualloc_malloc_same_size,
// UNKNOWN: error: gpualloc: unknown strategy 'no-such' (valid: cuda, atomic
// DRIVER: clang++ {{.*}}-Xarch_device -mllvm=-gpualloc-strategy=atomic
// DRIVER-NOT: gpualloc-strategy
// DRIVER: "-cc1" "-triple" "nvptx64-nvidia-cuda"{{.*}} "-mllvm" "-gpualloc-strategy=atomic"
// DRIVER-NOT: gpualloc-strategy
