// An unmodified program that builds a binary search tree per thread with
// `new` and tears it down with `delete`. Compiled twice: without <new>
// (clang then leaves calls to the bare operator symbols, which gpualloc must
// resolve) and with it (clang's inline definitions call malloc).
//
// REQUIRES: cuda-gpu
// RUN: %for-each-strategy -- %gpu-bin/tree_new
// RUN: %for-each-strategy -- %gpu-bin/tree_new_with_header
#ifdef WITH_NEW_HEADER
#include <new>
#endif
#include <cstdio>
#include <vector>

#include "Inputs/check.h"

struct tree_node {
  unsigned key;
  tree_node* left = nullptr;
  tree_node* right = nullptr;
  __device__ explicit tree_node(unsigned k) : key(k) {}
};

__device__ unsigned next_key(unsigned& state) {
  state = state * 1664525u + 1013904223u;
  return state >> 8;
}

// Builds a tree of `count` keys, returns the sum of keys visited in order if
// they come out sorted, else ~0; then deletes every node.
__global__ void grow_and_check(int count, unsigned long long* result, unsigned* failures) {
  int tid = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned state = tid * 7919u + 1;
  tree_node* root = nullptr;
  unsigned long long inserted_sum = 0;
  for (int i = 0; i < count; ++i) {
    unsigned key = next_key(state);
    tree_node** slot = &root;
    while (*slot != nullptr) slot = key < (*slot)->key ? &(*slot)->left : &(*slot)->right;
    *slot = new tree_node(key);
    if (*slot == nullptr) {
      atomicAdd(failures, 1u);
      return;
    }
    inserted_sum += key;
  }
  // In-order walk with an explicit stack, deleting each node after its visit.
  tree_node* stack[64];
  int depth = 0;
  unsigned long long sum = 0;
  unsigned previous = 0;
  bool sorted = true;
  tree_node* n = root;
  while (n != nullptr || depth > 0) {
    while (n != nullptr) {
      if (depth == 64) {  // degenerate tree: give up on the walk, the keys are random
        atomicAdd(failures, 1u);
        return;
      }
      stack[depth++] = n;
      n = n->left;
    }
    n = stack[--depth];
    sorted &= n->key >= previous;
    previous = n->key;
    sum += n->key;
    tree_node* right = n->right;
    delete n;
    n = right;
  }
  result[tid] = sorted && sum == inserted_sum ? sum : ~0ull;
}

int main() {
  const int threads = 1 << 15, block = 128, count = 48;
  unsigned long long* result;
  unsigned* failures;
  CHECK(cudaMalloc(&result, threads * sizeof(unsigned long long)));
  CHECK(cudaMallocManaged(&failures, sizeof(unsigned)));
  std::vector<unsigned long long> host(threads);
  for (int round = 0; round < 3; ++round) {
    *failures = 0;
    grow_and_check<<<threads / block, block>>>(count, result, failures);
    SYNC_CHECK();
    EXPECT(*failures == 0, "round %d: %u threads failed to allocate", round, *failures);
    CHECK(cudaMemcpy(host.data(), result, threads * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    for (int t = 0; t < threads; ++t) EXPECT(host[t] != ~0ull, "round %d thread %d: tree corrupted", round, t);
  }
  std::printf("tree_new: ok\n");
  return 0;
}
