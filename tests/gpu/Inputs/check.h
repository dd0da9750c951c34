// Error checking for the GPU test programs (plain CUDA, no gpualloc headers).
#pragma once
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t check_error_ = (call);                                                            \
    if (check_error_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                   \
                   cudaGetErrorString(check_error_));                                             \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

#define EXPECT(cond, ...)                                                                         \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      std::fprintf(stderr, "%s:%d: expectation failed: %s: ", __FILE__, __LINE__, #cond);          \
      std::fprintf(stderr, __VA_ARGS__);                                                          \
      std::fprintf(stderr, "\n");                                                                 \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

// Launch, then surface both launch and execution errors.
#define SYNC_CHECK()                         \
  do {                                       \
    CHECK(cudaGetLastError());               \
    CHECK(cudaDeviceSynchronize());          \
  } while (0)
