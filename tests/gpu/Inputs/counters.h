// A heap's counters through libgpualloc's host API, found with dlsym so the
// test programs need no gpualloc header (link them with -ldl).
#pragma once
#include <dlfcn.h>

#include "check.h"

struct counters {  // gpualloc_counters_t of interpose/include/gpualloc/host.h
  unsigned long long mallocs, frees, failed_mallocs, bytes_in_use, peak_bytes, double_frees, foreign_frees, overflows,
      use_after_frees;
};

// Synchronises the current context and returns its heap's counters.
inline counters read_counters() {
  auto read = reinterpret_cast<int (*)(counters*)>(dlsym(RTLD_DEFAULT, "gpualloc_counters"));
  EXPECT(read != nullptr, "libgpualloc's gpualloc_counters is not loaded");
  counters c{};
  EXPECT(read(&c) == 0, "gpualloc_counters failed");
  return c;
}

// The strategy libgpualloc runs (gpualloc_strategy_name).
inline const char* strategy_name() {
  auto name = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "gpualloc_strategy_name"));
  EXPECT(name != nullptr, "libgpualloc's gpualloc_strategy_name is not loaded");
  return name();
}
