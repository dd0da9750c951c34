// Per-thread buffers of varying size through every allocation form an
// unmodified program uses: malloc/free, new[]/delete[], nothrow new,
// over-aligned new/delete, malloc(0) and free(NULL).
//
// REQUIRES: cuda-gpu
// RUN: %for-each-strategy -- %gpu-bin/buffers
#include <new>
#include <cstdint>
#include <cstdio>

#include "Inputs/check.h"

struct alignas(128) cache_lines {
  unsigned words[64];
};

enum error_kind : unsigned { null_result, misaligned, corrupted, zero_size, error_kinds };

__device__ void fail(unsigned* errors, error_kind kind) { atomicAdd(&errors[kind], 1u); }

__global__ void exercise(unsigned* errors, int round) {
  unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned size = 1 + (tid * 2654435761u + round * 97u) % 3000;  // 1 B .. 3000 B

  char* bytes = new char[size];
  unsigned* words = static_cast<unsigned*>(malloc(size * sizeof(unsigned)));
  int* nothrow_ints = new (std::nothrow_t{}) int[size % 64 + 1];  // std::nothrow itself is a host variable
  cache_lines* lines = new cache_lines;
  void* empty = malloc(0);
  free(nullptr);

  if (!bytes || !words || !nothrow_ints || !lines) {
    fail(errors, null_result);
  } else {
    if (reinterpret_cast<std::uintptr_t>(bytes) % 16 || reinterpret_cast<std::uintptr_t>(words) % 16 ||
        reinterpret_cast<std::uintptr_t>(nothrow_ints) % 16 || reinterpret_cast<std::uintptr_t>(lines) % 128)
      fail(errors, misaligned);
    for (unsigned i = 0; i < size; ++i) bytes[i] = static_cast<char>(tid + i);
    for (unsigned i = 0; i < size; ++i) words[i] = tid ^ i;
    for (unsigned i = 0; i < size % 64 + 1; ++i) nothrow_ints[i] = static_cast<int>(tid + 3 * i);
    for (unsigned i = 0; i < 64; ++i) lines->words[i] = tid * 64 + i;
    bool ok = true;
    for (unsigned i = 0; i < size; ++i) ok &= bytes[i] == static_cast<char>(tid + i) && words[i] == (tid ^ i);
    for (unsigned i = 0; i < size % 64 + 1; ++i) ok &= nothrow_ints[i] == static_cast<int>(tid + 3 * i);
    for (unsigned i = 0; i < 64; ++i) ok &= lines->words[i] == tid * 64 + i;
    if (!ok) fail(errors, corrupted);
  }
  if (empty == nullptr) fail(errors, zero_size);
  delete[] bytes;
  free(words);
  delete[] nothrow_ints;
  delete lines;
  free(empty);
}

int main() {
  const int threads = 1 << 14, block = 128;
  unsigned* errors;
  CHECK(cudaMallocManaged(&errors, error_kinds * sizeof(unsigned)));
  for (int round = 0; round < 3; ++round) {
    for (int k = 0; k < error_kinds; ++k) errors[k] = 0;
    exercise<<<threads / block, block>>>(errors, round);
    SYNC_CHECK();
    EXPECT(errors[null_result] == 0, "round %d: %u threads got NULL", round, errors[null_result]);
    EXPECT(errors[misaligned] == 0, "round %d: %u threads got misaligned pointers", round, errors[misaligned]);
    EXPECT(errors[corrupted] == 0, "round %d: %u threads saw corrupted data", round, errors[corrupted]);
    EXPECT(errors[zero_size] == 0, "round %d: malloc(0) returned NULL %u times", round, errors[zero_size]);
  }
  std::printf("buffers: ok\n");
  return 0;
}
