// Shared host-side helpers of the benchmark programs.
//
// The benchmark programs are plain CUDA: their kernels call malloc/free and
// include no gpualloc header. They reach libgpualloc's host API only through
// dlsym(RTLD_DEFAULT, ...), so the same source runs (warm only) without it.
//
// Output protocol (read by bench/gpualloc-bench):
//   INFO key=value ...        facts about the run (strategy, reset available, GPU)
//   BEGIN <point>             a measurement point starts (the driver's watchdog
//                             blames a hang on the last BEGIN)
//   ROW,<csv fields>          one result, fields as in kRowHeader
//   ERROR <text>              a fatal error; the program exits non-zero after it
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

inline constexpr const char* kRowHeader =
    "test,mode,phase,size,size_max,threads,iters,metric,unit,median,min,max,reps,failures,note";

[[noreturn]] inline void fatal(const char* fmt, ...) {
  std::fflush(stdout);
  std::printf("ERROR ");
  va_list ap;
  va_start(ap, fmt);
  std::vprintf(fmt, ap);
  va_end(ap);
  std::printf("\n");
  std::fflush(stdout);
  std::exit(3);
}

#define BENCH_CUDA(call)                                                                       \
  do {                                                                                         \
    cudaError_t err_ = (call);                                                                 \
    if (err_ != cudaSuccess) bench::fatal("%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                                          cudaGetErrorString(err_));                           \
  } while (0)

// libgpualloc's host API, found at run time. Any entry may be null.
struct host_api {
  int (*reset)() = nullptr;
  const char* (*strategy_name)() = nullptr;
  unsigned long long (*heap_bytes)() = nullptr;

  static host_api find() {
    host_api a;
    a.reset = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "gpualloc_reset"));
    a.strategy_name = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "gpualloc_strategy_name"));
    a.heap_bytes = reinterpret_cast<unsigned long long (*)()>(dlsym(RTLD_DEFAULT, "gpualloc_heap_bytes"));
    return a;
  }

  std::string name() const {
    if (strategy_name) {
      const char* n = strategy_name();
      if (n) return n;
    }
    const char* e = std::getenv("GPUALLOC_STRATEGY");
    return e ? std::string(e) + "?" : std::string("unknown");
  }

  // Heap bytes as libgpualloc reports them, else CUDA's malloc heap limit.
  unsigned long long heap() const {
    if (heap_bytes) {
      unsigned long long b = heap_bytes();
      if (b) return b;
    }
    size_t lim = 0;
    cudaDeviceGetLimit(&lim, cudaLimitMallocHeapSize);
    return lim;
  }

  // Re-initialise the heap; false when unavailable or failed.
  bool do_reset() const {
    if (!reset) return false;
    BENCH_CUDA(cudaDeviceSynchronize());
    int rc = reset();
    BENCH_CUDA(cudaDeviceSynchronize());
    return rc == 0;
  }
};

// Median, min and max of a sample (empty: NaN).
struct stats {
  double median = 0, min = 0, max = 0;
  int n = 0;
};

inline stats summarize(std::vector<double> v) {
  stats s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) {
    s.median = s.min = s.max = std::nan("");
    return s;
  }
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  s.median = v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

struct row {
  std::string test, mode, phase;
  unsigned long long size = 0, size_max = 0, threads = 0, iters = 0;
  std::string metric = "time", unit = "ms";
  stats s;
  int failures = 0;
  std::string note;
};

inline void emit(const row& r) {
  auto num = [](double d) {
    char b[64];
    if (std::isnan(d)) return std::string();
    std::snprintf(b, sizeof b, "%.6g", d);
    return std::string(b);
  };
  std::string note = r.note;
  for (char& c : note)
    if (c == ',' || c == '\n') c = ';';
  std::printf("ROW,%s,%s,%s,%llu,%llu,%llu,%llu,%s,%s,%s,%s,%s,%d,%d,%s\n", r.test.c_str(), r.mode.c_str(),
              r.phase.c_str(), r.size, r.size_max, r.threads, r.iters, r.metric.c_str(), r.unit.c_str(),
              num(r.s.median).c_str(), num(r.s.min).c_str(), num(r.s.max).c_str(), r.s.n, r.failures,
              note.c_str());
  std::fflush(stdout);
}

inline void begin_point(const char* what) {
  std::printf("BEGIN %s\n", what);
  std::fflush(stdout);
}

// Times a region of GPU work with CUDA events, in milliseconds.
struct event_timer {
  cudaEvent_t a, b;
  event_timer() {
    BENCH_CUDA(cudaEventCreate(&a));
    BENCH_CUDA(cudaEventCreate(&b));
  }
  ~event_timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  void start() { BENCH_CUDA(cudaEventRecord(a)); }
  // Synchronises; a kernel error (trap, illegal address) is fatal here.
  double stop() {
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaEventRecord(b));
    BENCH_CUDA(cudaEventSynchronize(b));
    BENCH_CUDA(cudaGetLastError());
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    return ms;
  }
};

inline double wall_ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

inline void print_info(const host_api& api) {
  int dev = 0;
  cudaDeviceProp p{};
  BENCH_CUDA(cudaGetDevice(&dev));
  BENCH_CUDA(cudaGetDeviceProperties(&p, dev));
  std::string gpu = p.name;
  for (char& c : gpu)
    if (c == ' ') c = '_';
  std::printf("INFO strategy=%s reset=%s heap_bytes=%llu gpu=%s sms=%d\n", api.name().c_str(),
              api.reset ? "yes" : "no", api.heap(), gpu.c_str(), p.multiProcessorCount);
  std::fflush(stdout);
}

// 32-bit mix (lowbias32), usable on both sides.
__host__ __device__ inline std::uint32_t hash32(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// Simple argument access: --key value.
struct args {
  int argc;
  char** argv;
  const char* get(const char* key, const char* def = nullptr) const {
    for (int i = 1; i + 1 < argc; ++i)
      if (std::strcmp(argv[i], key) == 0) return argv[i + 1];
    return def;
  }
  bool flag(const char* key) const {
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], key) == 0) return true;
    return false;
  }
  long long num(const char* key, long long def) const {
    const char* v = get(key);
    return v ? std::strtoll(v, nullptr, 0) : def;
  }
  double real(const char* key, double def) const {
    const char* v = get(key);
    return v ? std::strtod(v, nullptr) : def;
  }
};

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(sep, b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

}  // namespace bench
