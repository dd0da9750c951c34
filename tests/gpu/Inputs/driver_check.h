// Error checking for the driver-API test programs.
#pragma once
#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#define DRIVER_CHECK(call)                                                                \
  do {                                                                                    \
    CUresult r_ = (call);                                                                 \
    if (r_ != CUDA_SUCCESS) {                                                             \
      const char* name_ = "?";                                                            \
      cuGetErrorName(r_, &name_);                                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, name_);   \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
