// The real CUDA driver, as libgpualloc itself calls it.
//
// libgpualloc never links libcuda and never calls a cu* function by name: its
// own exported cu* symbols (driver_hooks.cpp) would catch the call. Every
// driver call goes through `driver()`, a table of pointers resolved by ABI
// name (cuMemAlloc_v2, not the cuda.h macro cuMemAlloc) from libcuda.so.1
// with the real dlsym. The table is filled once, on first use; libgpualloc
// loads into programs that never touch a GPU (and onto machines without a
// driver) without needing libcuda at all.
//
// Never call the CUDA runtime (cuda*) from here: hooks run inside cudart.
#pragma once

#include <cuda.h>

namespace gpualloc::interpose {

// X(abi_name, return_type, parameter_list)
#define GPUALLOC_DRIVER_CALLS(X)                                                                     \
  X(cuGetErrorName, CUresult, (CUresult, const char**))                                              \
  X(cuCtxGetCurrent, CUresult, (CUcontext*))                                                         \
  X(cuCtxGetDevice, CUresult, (CUdevice*))                                                           \
  X(cuCtxGetId, CUresult, (CUcontext, unsigned long long*))                                          \
  X(cuCtxPushCurrent_v2, CUresult, (CUcontext))                                                      \
  X(cuCtxPopCurrent_v2, CUresult, (CUcontext*))                                                      \
  X(cuCtxSynchronize, CUresult, ())                                                                  \
  X(cuCtxSetLimit, CUresult, (CUlimit, size_t))                                                      \
  X(cuCtxGetLimit, CUresult, (size_t*, CUlimit))                                                     \
  X(cuDeviceGetAttribute, CUresult, (int*, CUdevice_attribute, CUdevice))                            \
  X(cuDevicePrimaryCtxGetState, CUresult, (CUdevice, unsigned int*, int*))                           \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext*, CUdevice))                                      \
  X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))                                              \
  X(cuMemGetInfo_v2, CUresult, (size_t*, size_t*))                                                   \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr*, size_t))                                                 \
  X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                           \
  X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void*, size_t, CUstream))                    \
  X(cuMemcpyDtoHAsync_v2, CUresult, (void*, CUdeviceptr, size_t, CUstream))                          \
  X(cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))                      \
  X(cuMemsetD32Async, CUresult, (CUdeviceptr, unsigned int, size_t, CUstream))                      \
  X(cuStreamCreate, CUresult, (CUstream*, unsigned int))                                             \
  X(cuStreamSynchronize, CUresult, (CUstream))                                                       \
  X(cuStreamDestroy_v2, CUresult, (CUstream))                                                        \
  X(cuModuleUnload, CUresult, (CUmodule))                                                            \
  X(cuStreamIsCapturing, CUresult, (CUstream, CUstreamCaptureStatus*))                               \
  X(cuStreamIsCapturing_ptsz, CUresult, (CUstream, CUstreamCaptureStatus*))                         \
  X(cuThreadExchangeStreamCaptureMode, CUresult, (CUstreamCaptureMode*))                             \
  X(cuModuleLoadData, CUresult, (CUmodule*, const void*))                                            \
  X(cuModuleLoadDataEx, CUresult, (CUmodule*, const void*, unsigned, CUjit_option*, void**))         \
  X(cuLibraryLoadData, CUresult,                                                                     \
    (CUlibrary*, const void*, CUjit_option*, void**, unsigned, CUlibraryOption*, void**, unsigned))  \
  X(cuDeviceGetCount, CUresult, (int*))                                                              \
  X(cuModuleGetFunction, CUresult, (CUfunction*, CUmodule, const char*))                             \
  X(cuModuleGetGlobal_v2, CUresult, (CUdeviceptr*, size_t*, CUmodule, const char*))                  \
  X(cuFuncGetModule, CUresult, (CUmodule*, CUfunction))                                              \
  X(cuFuncGetName, CUresult, (const char**, CUfunction))                                             \
  X(cuKernelGetFunction, CUresult, (CUfunction*, CUkernel))                                          \
  X(cuLaunchKernel, CUresult,                                                                        \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, \
     void**))                                                                                        \
  X(cuGraphGetNodes, CUresult, (CUgraph, CUgraphNode*, size_t*))                                     \
  X(cuGraphNodeGetType, CUresult, (CUgraphNode, CUgraphNodeType*))                                   \
  X(cuGraphKernelNodeGetParams_v2, CUresult, (CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2*))             \
  X(cuGraphChildGraphNodeGetGraph, CUresult, (CUgraphNode, CUgraph*))                                \
  X(cuGraphAddKernelNode_v2, CUresult,                                                               \
    (CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS_v2*))          \
  X(cuGraphAddMemsetNode, CUresult,                                                                  \
    (CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_MEMSET_NODE_PARAMS*, CUcontext))  \
  X(cuGraphDestroyNode, CUresult, (CUgraphNode))

struct driver_api {
#define GPUALLOC_DRIVER_FIELD(name, ret, params) ret(CUDAAPI* name) params = nullptr;
  GPUALLOC_DRIVER_CALLS(GPUALLOC_DRIVER_FIELD)
#undef GPUALLOC_DRIVER_FIELD
  bool loaded = false;  // libcuda.so.1 was found and every entry resolved
};

// The table, resolved on first call (thread-safe). When libcuda.so.1 cannot be
// loaded, loaded is false and every entry is null.
const driver_api& driver();

// The handle of libcuda.so.1 (null when there is none), loading it on first use.
void* libcuda_handle();

// libc's dlsym, not our hook (driver_hooks.cpp).
void* real_dlsym(void* handle, const char* name);
// The C library's dlopen and dlclose, for use inside any hook: a tool
// preloaded before libgpualloc (compute-sanitizer's and Nsight Compute's
// launcher and injection libraries) may interpose them, and must not be
// entered from inside the driver calls it is itself setting up.
void* real_dlopen(const char* file, int flags);
int real_dlclose(void* handle);

// "CUDA_ERROR_OUT_OF_MEMORY" or "CUresult 123".
const char* error_name(CUresult r);

// Makes `ctx` current for the lifetime of the scope when it is not already.
class context_scope {
 public:
  explicit context_scope(CUcontext ctx);
  ~context_scope();
  context_scope(const context_scope&) = delete;
  context_scope& operator=(const context_scope&) = delete;
  CUresult status() const { return status_; }

 private:
  bool pushed_ = false;
  CUresult status_ = CUDA_SUCCESS;
};

// Switches this thread to CU_STREAM_CAPTURE_MODE_RELAXED for the scope, so
// that libgpualloc's own allocations, copies and synchronisations are legal
// while the program captures a stream (and do not invalidate its capture).
class relaxed_capture_scope {
 public:
  relaxed_capture_scope();
  ~relaxed_capture_scope();
  relaxed_capture_scope(const relaxed_capture_scope&) = delete;
  relaxed_capture_scope& operator=(const relaxed_capture_scope&) = delete;

 private:
  CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool exchanged_ = false;
};

}  // namespace gpualloc::interpose
