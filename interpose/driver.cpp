// Resolution of the real driver entry points (see driver.h).
#include "driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "log.h"

namespace gpualloc::interpose {

namespace {

// The C library's `name` (glibc >= 2.34 versions it GLIBC_2.34, older ones
// GLIBC_2.2.5 in libdl), found after this library: a library loaded later at
// run time that interposes it too (compute-sanitizer's dlopen) is not
// reached, so calling it cannot re-enter that library while it initialises.
// Written once with the same value by whichever thread gets here first.
template <class Fn>
Fn libc_function(std::atomic<Fn>& cache, const char* name) {
  Fn f = cache.load(std::memory_order_acquire);
  if (f != nullptr) return f;
  f = reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, name, "GLIBC_2.34"));
  if (f == nullptr) f = reinterpret_cast<Fn>(dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5"));
  if (f == nullptr) {
    std::fprintf(stderr, "gpualloc: cannot find the C library's %s\n", name);
    std::abort();
  }
  cache.store(f, std::memory_order_release);
  return f;
}

}  // namespace

void* real_dlsym(void* handle, const char* name) {
  static std::atomic<void* (*)(void*, const char*)> real{nullptr};
  return libc_function(real, "dlsym")(handle, name);
}

void* real_dlopen(const char* file, int flags) {
  static std::atomic<void* (*)(const char*, int)> real{nullptr};
  return libc_function(real, "dlopen")(file, flags);
}

int real_dlclose(void* handle) {
  static std::atomic<int (*)(void*)> real{nullptr};
  return libc_function(real, "dlclose")(handle);
}

void* libcuda_handle() {
  static void* handle = [] {
    // The program's (or cudart's) copy when it is loaded, else a new one.
    // The C library's dlopen: this runs inside hooks (the first
    // cuGetProcAddress answer, while cudart loads the driver), where a
    // profiler's preloaded dlopen must not be entered (see driver.h).
    void* h = real_dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) h = real_dlopen("libcuda.so.1", RTLD_NOW);
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
