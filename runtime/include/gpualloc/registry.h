// The one list of strategies.
//
// Everything that names strategies reads this list: the device dispatch
// (dispatch.h), the environment parser and statistics of libgpualloc,
// gpualloc-info (and through it the README table, the conformance suite and
// the benchmark). Adding a strategy is one header under strategies/ plus one
// line here.
//
// This header is plain C++ with no CUDA dependency, so host-only tools can
// include it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

// X(id, type, name, reuse, largest, utilisation, churn, summary)
//   id          enumerator in gpualloc::strategy_id
//   type        class in gpualloc::strategies implementing the strategy
//               concept (strategy.h)
//   name        spelling in GPUALLOC_STRATEGY
//   reuse       gpualloc::reuse_policy: what free() gives back
//   largest     the largest single request it serves, in words
//   utilisation the percentage of the heap it promises to hand out in blocks
//               of 1 KiB to 1 MiB before its first NULL (the conformance
//               suite's exhaustion phase checks it; 0 for a strategy that
//               never says NULL)
//   churn       the percentage of the heap it promises to keep serving under
//               churn: threads freeing and allocating 1 KiB - 1 MiB blocks at
//               random while that many bytes stay live (the conformance
//               suite's churn phase checks it; a strategy that never reuses
//               memory is not asked)
//   summary     one line for --list and the README
#define GPUALLOC_STRATEGIES(X)                                                              \
  X(cuda, cuda_builtin, "cuda", full, "CUDA's heap limit", 50, 50,                              \
    "CUDA's built-in device malloc/free, passed through (heap size set from GPUALLOC_HEAP_SIZE)") \
  X(atomic, atomic_bump, "atomic", none, "the heap", 95, 0,                                     \
    "AtomicMalloc (Vinkler & Havran 2015): one atomicAdd per request (one per warp when coalesced); free is a no-op") \
  X(atomic_wrap, atomic_wrap, "atomic-wrap", unsafe, "the heap", 0, 0,                         \
    "AWMalloc (Vinkler & Havran 2015): a bump pointer that wraps to the heap's start; NOT SAFE: reuses memory still in use") \
  X(cmalloc, circular_malloc, "cmalloc", full, "the largest pre-split chunk, ~heap/(depth+1)", 60, 60, \
    "CMalloc (Vinkler & Havran 2015): first fit on a circular chunk list pre-split as a binary heap, split/merge") \
  X(cfmalloc, circular_fused_malloc, "cfmalloc", full, "the largest pre-split chunk, ~heap/(depth+1)", 60, 60, \
    "CFMalloc (Vinkler & Havran 2015): CMalloc with the used flag fused into the next offset (one word per header)") \
  X(cmmalloc, circular_multi_malloc, "cmmalloc", full, "the largest pre-split chunk of one SM's part, ~heap/(#SM*(depth+1))", 80, 80, \
    "CMMalloc (Vinkler & Havran 2015): CMalloc with one start offset and one pre-split heap per SM") \
  X(cfmmalloc, circular_fused_multi_malloc, "cfmmalloc", full, "the largest pre-split chunk of one SM's part, ~heap/(#SM*(depth+1))", 80, 80, \
    "CFMMalloc (Vinkler & Havran 2015): CFMalloc with one start offset and one pre-split heap per SM") \
  X(gallatin, gallatin, "gallatin", full, "the heap less its tables, as a run of whole segments (heap/32 to heap/64, at most 16 MiB each)", 75, 5, \
    "Gallatin (McCoy & Pandey 2024): segments in a 64-ary bit tree, blocks per size, 4096 slices per block, per-SM block buffers, one atomic per warp and size class") \
  X(ouroboros_p_s, ouroboros_p_s, "ouroboros-p-s", full, "the heap less its tables (a run of 1 KiB units)", 80, 80, \
    "Ouroboros-P-S (Winter et al. 2020): 8 KiB chunks of pages in 15 sizes, static queues of free pages, bulk semaphore; a size holds at most its queue's length") \
  X(ouroboros_p_va, ouroboros_p_va, "ouroboros-p-va", full, "the heap less its tables (a run of 1 KiB units)", 80, 80, \
    "Ouroboros-P-VA (Winter et al. 2020): queues of free pages virtualised on queue chunks behind a small pointer array") \
  X(ouroboros_p_vl, ouroboros_p_vl, "ouroboros-p-vl", full, "the heap less its tables (a run of 1 KiB units)", 80, 80, \
    "Ouroboros-P-VL (Winter et al. 2020): queues of free pages as linked queue chunks, front/back/old pointers, lagged reclamation") \
  X(ouroboros_c_s, ouroboros_c_s, "ouroboros-c-s", full, "the heap less its tables (a run of 1 KiB units)", 80, 80, \
    "Ouroboros-C-S (Winter et al. 2020): static queues of chunks with free pages, a bit-field per chunk, free chunks back to the pool") \
  X(ouroboros_c_va, ouroboros_c_va, "ouroboros-c-va", full, "the heap less its tables (a run of 1 KiB units)", 80, 80, \
    "Ouroboros-C-VA (Winter et al. 2020): queues of chunks with free pages virtualised on queue chunks behind a small pointer array") \
  X(ouroboros_c_vl, ouroboros_c_vl, "ouroboros-c-vl", full, "the heap less its tables (a run of 1 KiB units)", 80, 80, \
    "Ouroboros-C-VL (Winter et al. 2020): queues of chunks with free pages as linked queue chunks, lagged reclamation") \
  X(rw, rw, "rw", full, "the heap less its tables (a run of units: 256 B, GPUALLOC_RW_UNIT)", 90, 80,                 \
    "RW (Pham et al. 2022): units with a used bit each, found by random probing one unit a step; small requests of a warp packed in one run") \
  X(rw_bm, rw_bm, "rw-bm", full, "the heap less its tables (a run of units: 256 B, GPUALLOC_RW_UNIT)", 90, 80,           \
    "RW-BM (Pham et al. 2022): RW probing a 32-bit word of the used bitmap a step, under its LockMap bit") \
  X(corw, corw, "corw", full, "the heap less its tables (a run of units: 256 B, GPUALLOC_RW_UNIT)", 90, 80,              \
    "CoRW (Pham et al. 2022): RW-BM whose lanes pool the free units they find and deal them out across the warp") \
  X(crw, crw, "crw", full, "the heap less its tables (a run of units: 256 B, GPUALLOC_RW_UNIT)", 90, 80,                 \
    "CRW (Pham et al. 2022): RW trying the units after the thread's last claim first") \
  X(sm_slab, sm_slab, "sm-slab", full, "the heap less its tables, as a run of whole segments (32 KiB to 1 MiB each; 2 KiB up in heaps under 2 MiB)", 85, 70, \
    "sm-slab (this project): per-SM current and next slab per size class, one fetch-add per warp (and one fetch-and once a slab is reused), free bitmaps, partly free slabs reused once their class runs out")

namespace gpualloc {

enum class strategy_id : std::uint32_t {
#define GPUALLOC_ENUMERATOR(id, type, name, reuse, largest, utilisation, churn, summary) id,
  GPUALLOC_STRATEGIES(GPUALLOC_ENUMERATOR)
#undef GPUALLOC_ENUMERATOR
};

// What a strategy's free() does with the memory.
enum class reuse_policy : std::uint8_t {
  none,    // free is a no-op: memory is never handed out twice
  unsafe,  // memory is handed out again even while still in use (a wrapping bump pointer)
  full,    // freed memory is reused, live memory never is
};

struct strategy_info {
  strategy_id id;
  std::string_view name;
  reuse_policy reuse;
  std::string_view largest_request;
  std::uint32_t utilisation_percent;  // of the heap, in 1 KiB - 1 MiB blocks, before the first NULL
  std::uint32_t churn_percent;        // of the heap kept live under churn without a NULL
  std::string_view summary;
};

inline constexpr strategy_info strategy_table[] = {
#define GPUALLOC_INFO(id, type, name, reuse, largest, utilisation, churn, summary) \
  {strategy_id::id, name, reuse_policy::reuse, largest, utilisation, churn, summary},
    GPUALLOC_STRATEGIES(GPUALLOC_INFO)
#undef GPUALLOC_INFO
};

inline constexpr std::size_t strategy_count = sizeof(strategy_table) / sizeof(strategy_table[0]);

// The strategy used when GPUALLOC_STRATEGY is not set.
inline constexpr strategy_id default_strategy = strategy_id::sm_slab;

constexpr std::string_view reuse_policy_name(reuse_policy r) {
  switch (r) {
    case reuse_policy::none: return "none";
    case reuse_policy::unsafe: return "unsafe";
    case reuse_policy::full: return "full";
  }
  return "?";
}

// nullptr when no strategy has that name.
constexpr const strategy_info* find_strategy(std::string_view name) {
  for (const strategy_info& s : strategy_table)
    if (s.name == name) return &s;
  return nullptr;
}

constexpr const strategy_info& strategy(strategy_id id) {
  return strategy_table[static_cast<std::uint32_t>(id)];
}

}  // namespace gpualloc
