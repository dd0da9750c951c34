// Host/device annotations, written once.
//
// Strategy cores are plain C++ that also compiles for the host (g++ or clang),
// so CPU threads can stress them under ThreadSanitizer where no GPU exists.
// GPUALLOC_HD marks every function that must exist on both sides.
#pragma once

#if defined(__CUDACC__) || defined(__CUDA__)
#define GPUALLOC_HD __host__ __device__
#define GPUALLOC_DEVICE __device__
#else
#define GPUALLOC_HD
#define GPUALLOC_DEVICE
#endif

// True while compiling device code (nvcc's and clang's device passes).
#if defined(__CUDA_ARCH__)
#define GPUALLOC_ON_DEVICE 1
#else
#define GPUALLOC_ON_DEVICE 0
#endif

#define GPUALLOC_INLINE GPUALLOC_HD inline
