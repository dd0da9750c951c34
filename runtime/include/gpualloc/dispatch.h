// From a run-time strategy id to the strategy's code.
//
// The switch is generated from the registry, so a new strategy needs no edit
// here beyond including its header.
#pragma once

#include <utility>

#include "gpualloc/heap.h"
#include "gpualloc/registry.h"
#include "gpualloc/strategy.h"
#include "gpualloc/strategies/atomic.h"
#include "gpualloc/strategies/atomic_wrap.h"
#include "gpualloc/strategies/circular.h"
#include "gpualloc/strategies/cuda.h"
#include "gpualloc/strategies/gallatin/gallatin.h"
#include "gpualloc/strategies/ouroboros/ouroboros.h"
#include "gpualloc/strategies/random_walk/random_walk.h"
#include "gpualloc/strategies/sm_slab/sm_slab.h"

namespace gpualloc {

template <allocation_strategy Strategy>
struct strategy_tag {
  using type = Strategy;
};

// Calls fn(strategy_tag<S>{}) for the strategy with this id. Always
// inlined: the runtime built for one strategy passes a constant id, and only
// an inlined switch folds to that strategy's case. Left out of line (LLVM's
// choice for the large switch in heap_free's tracking path), the call kept
// every registered strategy's free in each strategy's runtime: the joined
// module carried ~400 KiB of PTX that could never run, and the driver
// compiled it at every cold load.
template <class Fn>
__attribute__((always_inline)) GPUALLOC_INLINE decltype(auto) visit_strategy(strategy_id id, Fn&& fn) {
  switch (id) {
#define GPUALLOC_CASE(id, type, name, reuse, largest, utilisation, churn, summary) \
  case strategy_id::id:                                                    \
    return std::forward<Fn>(fn)(strategy_tag<strategies::type>{});
    GPUALLOC_STRATEGIES(GPUALLOC_CASE)
#undef GPUALLOC_CASE
  }
  return std::forward<Fn>(fn)(strategy_tag<strategies::atomic_bump>{});  // unreachable: ids come from the registry
}

// Number of init phases (kernel launches) the strategy's init needs.
GPUALLOC_INLINE int init_phases(strategy_id id) {
  return visit_strategy(id, [](auto tag) { return decltype(tag)::type::init_phases; });
}

// One thread's share of init phase `phase` over `threads` threads.
GPUALLOC_INLINE void init_strategy(heap_header* h, int phase, std::uint64_t thread, std::uint64_t threads) {
  visit_strategy(static_cast<strategy_id>(h->strategy), [&](auto tag) {
    using S = typename decltype(tag)::type;
    S::init(state_of<typename S::state>(h), h->space, phase, thread, threads);
  });
}

// --- host side -------------------------------------------------------------

// Whether the strategy hands out memory from the heap's arena (all but `cuda`).
inline bool manages_arena(strategy_id id) {
  return visit_strategy(id, [](auto tag) { return strategy_traits<typename decltype(tag)::type>::manages_arena; });
}

// Lays out the strategy's state for the header's arena (h->strategy and
// h->space are set). Before the init phases, on every (re)initialisation.
inline void plan_strategy(heap_header* h, const device_facts& facts) {
  visit_strategy(static_cast<strategy_id>(h->strategy), [&](auto tag) {
    using S = typename decltype(tag)::type;
    strategy_traits<S>::plan(state_of<typename S::state>(h), h->space, facts);
  });
}

// The launch of init phase `phase` (after plan_strategy).
inline init_grid init_shape(heap_header* h, int phase, const device_facts& facts) {
  return visit_strategy(static_cast<strategy_id>(h->strategy), [&](auto tag) {
    using S = typename decltype(tag)::type;
    return strategy_traits<S>::init_shape(state_of<typename S::state>(h), h->space, phase, facts);
  });
}

}  // namespace gpualloc
