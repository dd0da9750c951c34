/* gpualloc's host API, for tests and benchmarks.
 *
 * libgpualloc.so exports these C functions. A program that must stay
 * unmodified (and run without libgpualloc) can find them at run time:
 *
 *   auto reset = (int (*)(void))dlsym(RTLD_DEFAULT, "gpualloc_reset");
 *   if (reset) reset();
 *
 * Every function acts on the heap of the calling thread's current CUDA
 * context. Return values: 0 on success, else a CUresult (driver error code).
 */
#ifndef GPUALLOC_HOST_H
#define GPUALLOC_HOST_H

#ifdef __cplusplus
extern "C" {
#endif

/* A copy of a heap's event counters (gpualloc::heap_counters in
 * runtime/include/gpualloc/heap.h, same layout). mallocs, frees and
 * failed_mallocs are counted with GPUALLOC_STATS=1 or GPUALLOC_CHECK=1;
 * bytes_in_use and peak_bytes with GPUALLOC_STATS=1; double_frees,
 * foreign_frees, overflows (blocks found written past either end) and
 * use_after_frees (freed blocks found written) with GPUALLOC_CHECK=1.
 * Otherwise they stay 0. */
struct gpualloc_counters_t {
  unsigned long long mallocs;
  unsigned long long frees;
  unsigned long long failed_mallocs;
  unsigned long long bytes_in_use;
  unsigned long long peak_bytes;
  unsigned long long double_frees;
  unsigned long long foreign_frees;
  unsigned long long overflows;
  unsigned long long use_after_frees;
};

/* Synchronises the current context and re-initialises its heap: every block
 * is free again and the counters are 0. Strategy `cuda`: only the counters
 * (CUDA's own heap cannot be reset). No heap yet: nothing to do, returns 0. */
int gpualloc_reset(void);

/* Synchronises the current context and copies its heap's counters into *out.
 * No heap yet: *out is all zeros, returns 0. */
int gpualloc_counters(struct gpualloc_counters_t* out);

/* The strategy of this process (GPUALLOC_STRATEGY or the default), e.g. "atomic". */
const char* gpualloc_strategy_name(void);

/* Bytes of the current context's heap (the whole allocation, header
 * included; strategy `cuda`: CUDA's heap limit), or 0 when it has none yet. */
unsigned long long gpualloc_heap_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUALLOC_HOST_H */
