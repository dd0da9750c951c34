// Checked mode and CUDA graphs: a kernel launched into a stream being
// captured, and one added to a graph by hand, gets its stamp and its sweep
// as nodes of the graph, so every run of the graph reports damage with the
// graph's kernel named (an overflow found by its free) and finds writes
// after free by the sweep after it. Each counted once per run, under every
// strategy.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M %for-each-strategy -- %gpu-bin/checked_graph
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M GPUALLOC_STRATEGY=sm-slab %gpu-bin/checked_graph > %t 2>&1
// RUN: FileCheck %s < %t
// RUN: FileCheck %s --check-prefix=SWEPT < %t
// RUN: FileCheck %s --check-prefix=NAMED < %t
// RUN: FileCheck %s --check-prefix=BY-HAND < %t
// RUN: FileCheck %s --check-prefix=BY-HAND-SWEPT < %t
// CHECK-COUNT-2: gpualloc: heap-buffer-overflow of the 16-byte block at 0x{{[0-9a-f]+}}: bytes 16 .. 16 written (allocated by kernel _Z18misbehave_in_graphv block (0,0,0) thread (1,0,0)); found by the free in kernel _Z18misbehave_in_graphv block (0,0,0) thread (1,0,0)
// SWEPT-COUNT-2: gpualloc: heap-use-after-free of the 32-byte block at 0x{{[0-9a-f]+}}: bytes 4 .. 7 written after its free (allocated by kernel _Z18misbehave_in_graphv block (0,0,0) thread (2,0,0); freed by kernel _Z18misbehave_in_graphv block (0,0,0) thread (2,0,0)); found by the sweep after kernel _Z18misbehave_in_graphv
// BY-HAND-COUNT-2: gpualloc: heap-buffer-overflow of the 16-byte block at 0x{{[0-9a-f]+}}: bytes 16 .. 16 written (allocated by kernel _Z17misbehave_by_handv block (0,0,0) thread (1,0,0)); found by the free in kernel _Z17misbehave_by_handv block (0,0,0) thread (1,0,0)
// BY-HAND-SWEPT-COUNT-2: gpualloc: heap-use-after-free of the 32-byte block at 0x{{[0-9a-f]+}}: bytes 4 .. 7 written after its free (allocated by kernel _Z17misbehave_by_handv block (0,0,0) thread (2,0,0); freed by kernel _Z17misbehave_by_handv block (0,0,0) thread (2,0,0)); found by the sweep after kernel _Z17misbehave_by_handv
// NAMED-NOT: kernel ?
// NAMED: checked_graph: ok
#include <cstdio>

#include "Inputs/check.h"
#include "Inputs/counters.h"

// Thread 1 writes one byte past a 16-byte block and frees it; thread 2
// writes into a block it freed.
__device__ void misbehave() {
  if (threadIdx.x == 1) {
    char* p = static_cast<char*>(malloc(16));
    p[16] = 1;
    free(p);
  } else if (threadIdx.x == 2) {
    int* q = static_cast<int*>(malloc(32));
    free(q);
    q[1] = 5;
  }
}
__global__ void misbehave_in_graph() { misbehave(); }
__global__ void misbehave_by_hand() { misbehave(); }

// Runs `exec` twice; after each run, `before` + the runs so far of each error.
void run_twice(cudaGraphExec_t exec, cudaStream_t stream, unsigned long long before) {
  for (unsigned long long run = 1; run <= 2; ++run) {
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    const counters c = read_counters();
    EXPECT(c.overflows == before + run && c.use_after_frees == before + run,
           "after %llu runs of the graph: %llu overflows and %llu uses after free counted", run, c.overflows,
           c.use_after_frees);
    EXPECT(c.double_frees + c.foreign_frees == 0, "bad frees counted: %llu double, %llu foreign", c.double_frees,
           c.foreign_frees);
  }
}

int main() {
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  misbehave_in_graph<<<1, 32, 0, stream>>>();
  CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  run_twice(exec, stream, 0);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));

  // The other kernel, added by hand after an empty node: unstamped, its
  // reports would name misbehave_in_graph, the kernel that ran before it.
  CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphNode_t start, node;
  CHECK(cudaGraphAddEmptyNode(&start, graph, nullptr, 0));
  cudaKernelNodeParams params{};
  params.func = reinterpret_cast<void*>(misbehave_by_hand);
  params.gridDim = dim3(1);
  params.blockDim = dim3(32);
  CHECK(cudaGraphAddKernelNode(&node, graph, &start, 1, &params));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  run_twice(exec, stream, 2);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  std::printf("checked_graph: ok\n");
  return 0;
}
