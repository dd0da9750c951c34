// Resolution of the real driver entry points (see driver.h).
#include "driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "log.h"

namespace gpualloc::interpose {

void* real_dlsym(void* handle, const char* name) {
  using dlsym_fn = void* (*)(void*, const char*);
  // Written once with the same value by whichever thread gets here first.
  static std::atomic<dlsym_fn> real{nullptr};
  dlsym_fn f = real.load(std::memory_order_acquire);
  if (f == nullptr) {
    // RTLD_NEXT from this library: libc's (glibc >= 2.34) or libdl's dlsym.
    f = reinterpret_cast<dlsym_fn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (f == nullptr) f = reinterpret_cast<dlsym_fn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    if (f == nullptr) {
      std::fprintf(stderr, "gpualloc: cannot find the C library's dlsym\n");
      std::abort();
    }
    real.store(f, std::memory_order_release);
  }
  return f(handle, name);
}

void* libcuda_handle() {
  static void* handle = [] {
    // The program's (or cudart's) copy when it is loaded, else a new one.
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h == nullptr) GPUALLOC_VERBOSE("cannot load libcuda.so.1: %s", dlerror());
    return h;
  }();
  return handle;
}

const driver_api& driver() {
  static driver_api* table = [] {
    auto* t = new driver_api();  // never destroyed: hooks may run during exit
    void* h = libcuda_handle();
    if (h == nullptr) return t;
    bool complete = true;
#define GPUALLOC_DRIVER_RESOLVE(name, ret, params)                               \
  t->name = reinterpret_cast<decltype(t->name)>(real_dlsym(h, #name));           \
  if (t->name == nullptr && std::strcmp(#name, "cuCtxGetId") != 0 &&             \
      std::strcmp(#name, "cuStreamIsCapturing_ptsz") != 0) {                     \
    GPUALLOC_LOG("the CUDA driver lacks %s; libgpualloc needs CUDA 12.0 or newer", #name); \
    complete = false;                                                            \
  }
    GPUALLOC_DRIVER_CALLS(GPUALLOC_DRIVER_RESOLVE)
#undef GPUALLOC_DRIVER_RESOLVE
    t->loaded = complete;
    return t;
  }();
  return *table;
}

const char* error_name(CUresult r) {
  const char* name = nullptr;
  if (driver().cuGetErrorName != nullptr && driver().cuGetErrorName(r, &name) == CUDA_SUCCESS && name != nullptr)
    return name;
  static thread_local char buffer[32];
  std::snprintf(buffer, sizeof buffer, "CUresult %d", static_cast<int>(r));
  return buffer;
}

context_scope::context_scope(CUcontext ctx) {
  CUcontext current = nullptr;
  status_ = driver().cuCtxGetCurrent(&current);
  if (status_ == CUDA_SUCCESS && current != ctx) {
    status_ = driver().cuCtxPushCurrent_v2(ctx);
    pushed_ = status_ == CUDA_SUCCESS;
  }
}

context_scope::~context_scope() {
  if (pushed_) {
    CUcontext popped;
    driver().cuCtxPopCurrent_v2(&popped);
  }
}

relaxed_capture_scope::relaxed_capture_scope() {
  previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  exchanged_ = driver().cuThreadExchangeStreamCaptureMode(&previous_) == CUDA_SUCCESS;
}

relaxed_capture_scope::~relaxed_capture_scope() {
  if (exchanged_) driver().cuThreadExchangeStreamCaptureMode(&previous_);
}

}  // namespace gpualloc::interpose
