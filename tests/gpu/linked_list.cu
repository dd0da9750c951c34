// An unmodified program: each thread builds a singly linked list with malloc,
// another kernel walks, sums and frees it; three rounds.
//
// REQUIRES: cuda-gpu
// RUN: %for-each-strategy -- %gpu-bin/linked_list
#include <cstdio>
#include <vector>

#include "Inputs/check.h"

struct node {
  long long value;
  node* next;
};

__global__ void build(node** heads, int length, unsigned* failures) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  node* head = nullptr;
  for (int i = 0; i < length; ++i) {
    node* n = static_cast<node*>(malloc(sizeof(node)));
    if (n == nullptr) {
      atomicAdd(failures, 1u);
      break;
    }
    n->value = (long long)tid * length + i;
    n->next = head;
    head = n;
  }
  heads[tid] = head;
}

__global__ void sum_and_free(node** heads, long long* sums) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  long long sum = 0;
  for (node* n = heads[tid]; n != nullptr;) {
    node* next = n->next;
    sum += n->value;
    free(n);
    n = next;
  }
  sums[tid] = sum;
}

int main() {
  const int threads = 1 << 16, block = 256, length = 16;
  node** heads;
  long long* sums;
  unsigned* failures;
  CHECK(cudaMalloc(&heads, threads * sizeof(node*)));
  CHECK(cudaMalloc(&sums, threads * sizeof(long long)));
  CHECK(cudaMallocManaged(&failures, sizeof(unsigned)));
  std::vector<long long> host(threads);
  for (int round = 0; round < 3; ++round) {
    *failures = 0;
    build<<<threads / block, block>>>(heads, length, failures);
    sum_and_free<<<threads / block, block>>>(heads, sums);
    SYNC_CHECK();
    EXPECT(*failures == 0, "round %d: %u allocations failed", round, *failures);
    CHECK(cudaMemcpy(host.data(), sums, threads * sizeof(long long), cudaMemcpyDeviceToHost));
    for (int t = 0; t < threads; ++t) {
      long long first = (long long)t * length, expected = first * length + (long long)length * (length - 1) / 2;
      EXPECT(host[t] == expected, "round %d thread %d: sum %lld, expected %lld", round, t, host[t], expected);
    }
  }
  std::printf("linked_list: ok\n");
  return 0;
}
