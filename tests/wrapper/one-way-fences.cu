// REQUIRES: clang
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o - --gpualloc-strategy=sm-slab --offload-arch=sm_90 \
// RUN:   | FileCheck %s --check-prefix=SM90 --implicit-check-not="gpualloc: release fence" \
// RUN:     --implicit-check-not="gpualloc: acquire fence"
// RUN: %gpualloc-clangxx -O2 --cuda-device-only -S %s -o - --gpualloc-strategy=sm-slab --offload-arch=sm_80 \
// RUN:   | FileCheck %s --check-prefix=SM80 --implicit-check-not="gpualloc: release fence" \
// RUN:     --implicit-check-not="gpualloc: acquire fence" --implicit-check-not=fence.release \
// RUN:     --implicit-check-not=fence.acquire

// The runtime writes its one-way fences as inline assembly valid for every
// GPU (abi.h); linked into a pinned module, they become LLVM fences at
// device scope, which the backend lowers to fence.release.gpu and
// fence.acquire.gpu on sm_90 and later (PTX ISA 8.6), and to the two-way
// fence.acq_rel.gpu before. sm-slab's free releases with one fence, and its
// last free of a block acquires with one.

__global__ void kernel(int** in) { delete in[threadIdx.x]; }

// SM90-DAG: fence.release.gpu;
// SM90-DAG: fence.acquire.gpu;
// SM80: fence.acq_rel.gpu;
