// Kernels that allocate run for the first time inside CUDA graphs: one
// captured from a stream, one added as an explicit kernel node. libgpualloc
// must set up their module's heap during capture / instantiation.
//
// REQUIRES: cuda-gpu
// RUN: %for-each-strategy -- %gpu-bin/graph
#include <cstdio>
#include <vector>

#include "Inputs/check.h"

__global__ void allocate(int** slots, int round) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  int* p = static_cast<int*>(malloc(8 * sizeof(int)));
  if (p != nullptr)
    for (int i = 0; i < 8; ++i) p[i] = tid + round + i;
  slots[tid] = p;
}

__global__ void release(int** slots, long long* sums) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  long long sum = -1;
  if (int* p = slots[tid]) {
    sum = 0;
    for (int i = 0; i < 8; ++i) sum += p[i];
    free(p);
  }
  sums[tid] = sum;
}

int main() {
  const int threads = 1 << 14, block = 128;
  int** slots;
  long long* sums;
  CHECK(cudaMalloc(&slots, threads * sizeof(int*)));
  CHECK(cudaMalloc(&sums, threads * sizeof(long long)));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // The allocating kernel enters through stream capture: its first launch is captured.
  cudaGraph_t graph;
  const int round = 5;
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  allocate<<<threads / block, block, 0, stream>>>(slots, round);
  CHECK(cudaStreamEndCapture(stream, &graph));

  // The freeing kernel enters as an explicit node: it never runs outside a graph.
  cudaGraphNode_t allocate_node, release_node;
  size_t count = 1;
  CHECK(cudaGraphGetNodes(graph, &allocate_node, &count));
  void* args[] = {&slots, &sums};
  cudaKernelNodeParams params = {};
  params.func = reinterpret_cast<void*>(release);
  params.gridDim = dim3(threads / block);
  params.blockDim = dim3(block);
  params.kernelParams = args;
  CHECK(cudaGraphAddKernelNode(&release_node, graph, &allocate_node, 1, &params));

  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<long long> host(threads);
  for (int launch = 0; launch < 4; ++launch) {
    CHECK(cudaGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaMemcpy(host.data(), sums, threads * sizeof(long long), cudaMemcpyDeviceToHost));
    for (int t = 0; t < threads; ++t)
      EXPECT(host[t] == 8ll * (t + round) + 28, "launch %d thread %d: sum %lld", launch, t, host[t]);
  }
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  std::printf("graph: ok\n");
  return 0;
}
