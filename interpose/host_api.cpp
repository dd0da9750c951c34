// The host API of include/gpualloc/host.h.
#include "gpualloc/host.h"

#include <cstddef>
#include <cstring>

#include "context_heaps.h"
#include "gpualloc/dispatch.h"
#include "driver.h"
#include "log.h"

#define GPUALLOC_EXPORT __attribute__((visibility("default")))

namespace gpualloc::interpose {
namespace {

static_assert(sizeof(gpualloc_counters_t) == sizeof(heap_counters), "host.h mirrors heap_counters");
static_assert(offsetof(gpualloc_counters_t, use_after_frees) == offsetof(heap_counters, use_after_frees),
              "host.h mirrors heap_counters");

// The current context, or null.
CUcontext current_context() {
  CUcontext ctx = nullptr;
  if (!driver().loaded || driver().cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return nullptr;
  return ctx;
}

}  // namespace
}  // namespace gpualloc::interpose

using namespace gpualloc::interpose;

extern "C" GPUALLOC_EXPORT int gpualloc_reset(void) {
  CUcontext ctx = current_context();
  if (ctx == nullptr) return 0;
  heap_ref h = find_heap(ctx);
  return h != nullptr ? static_cast<int>(reset_heap(*h)) : 0;
}

extern "C" GPUALLOC_EXPORT int gpualloc_counters(gpualloc_counters_t* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::memset(out, 0, sizeof *out);
  CUcontext ctx = current_context();
  if (ctx == nullptr) return 0;
  heap_ref h = find_heap(ctx);
  if (h == nullptr) return 0;
  gpualloc::heap_counters counters{};
  CUresult r = read_counters(*h, &counters, true);
  if (r == CUDA_SUCCESS) std::memcpy(out, &counters, sizeof counters);
  return static_cast<int>(r);
}

extern "C" GPUALLOC_EXPORT const char* gpualloc_strategy_name(void) {
  // Names in the registry are string literals: null-terminated.
  return gpualloc::strategy(settings().strategy).name.data();
}

extern "C" GPUALLOC_EXPORT unsigned long long gpualloc_heap_bytes(void) {
  CUcontext ctx = current_context();
  if (ctx == nullptr) return 0;
  heap_ref h = find_heap(ctx);
  if (h == nullptr) return 0;
  if (gpualloc::manages_arena(h->strategy)) return h->bytes;
  size_t limit = 0;  // CUDA's heap, as it is now (the program may have changed it)
  return driver().cuCtxGetLimit(&limit, CU_LIMIT_MALLOC_HEAP_SIZE) == CUDA_SUCCESS ? limit : h->cuda_heap_bytes;
}
