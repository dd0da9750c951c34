// The contract between a strategy and the rest of gpualloc (the concept
// allocation_strategy below, and strategy_traits for the optional hooks).
//
// A strategy is a class in gpualloc::strategies with static members only:
//
//   struct state;                  its fixed-size state, placed in
//                                  heap_header::strategy_state; trivially
//                                  copyable and standard layout, because the
//                                  host writes it (plan) and the device reads it
//   static constexpr int init_phases;
//   static void init(state&, const arena&, int phase, uint64 thread, uint64 threads);
//                                  device: thread `thread` of `threads` does its
//                                  share of phase `phase`; phases run in order,
//                                  one kernel launch each, so a phase sees all
//                                  writes of the phases before it
//   static void* malloc(state&, const arena&, uint64 bytes, const lane_group&);
//   static void  free(state&, const arena&, void* block, const lane_group&);
//                                  device (and host, for the CPU stress tests)
//
// and may provide these host hooks (defaults in strategy_traits below):
//
//   static void plan(state&, const arena&, const device_facts&);
//                                  the layout, from the arena's size: where the
//                                  trees, queues and tables lie, how many of
//                                  each. Runs on the host before the init
//                                  phases (and again on every reset), so init
//                                  and malloc read one layout that was computed
//                                  once. Default: a value-initialised state.
//   static init_grid init_shape(const state&, const arena&, int phase, const device_facts&);
//                                  the launch of init phase `phase`.
//                                  Default: 4 blocks of 256 threads per SM.
//   static constexpr bool manages_arena;
//                                  false: the strategy hands out memory from
//                                  somewhere else (the `cuda` strategy: CUDA's
//                                  own heap), so the heap is only a header and
//                                  the arena is empty. Default: true.
//
// `bytes` given to malloc is already rounded to 16 and at least 16 (allocate.h);
// the block it returns must be 16-byte aligned, lie in the arena (if it manages
// one) and stay valid until free. A request it cannot serve returns NULL and
// changes nothing that a later request could notice.
//
// A reset (gpualloc_reset) is plan + every init phase again, on the same arena.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "gpualloc/config.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"

namespace gpualloc {

// What the host knows when it lays out a heap: the device, and the layout
// options of the environment.
struct device_facts {
  std::uint32_t sm_count = 1;       // multiprocessors of the device
  std::uint32_t rw_unit_bytes = 0;  // the random walk's unit (GPUALLOC_RW_UNIT); 0: its default
};

// The launch of one init phase.
struct init_grid {
  std::uint32_t blocks = 1;
  std::uint32_t threads_per_block = 256;
};

template <class S>
concept allocation_strategy = requires(typename S::state& s, const arena& a, std::uint64_t n, void* p,
                            const detail::lane_group& g, int phase) {
  requires std::is_trivially_copyable_v<typename S::state>;
  requires std::is_standard_layout_v<typename S::state>;
  requires sizeof(typename S::state) <= strategy_state_bytes;
  { S::init_phases } -> std::convertible_to<int>;
  S::init(s, a, phase, n, n);
  { S::malloc(s, a, n, g) } -> std::same_as<void*>;
  { S::free(s, a, p, g) } -> std::same_as<void>;
};

// The optional hooks of strategy S, with their defaults.
template <allocation_strategy S>
struct strategy_traits {
  static constexpr bool manages_arena = [] {
    if constexpr (requires { S::manages_arena; })
      return static_cast<bool>(S::manages_arena);
    else
      return true;
  }();

  static void plan(typename S::state& s, const arena& a, const device_facts& facts) {
    if constexpr (requires { S::plan(s, a, facts); })
      S::plan(s, a, facts);
    else
      s = typename S::state{};
  }

  static init_grid init_shape(const typename S::state& s, const arena& a, int phase, const device_facts& facts) {
    if constexpr (requires { S::init_shape(s, a, phase, facts); })
      return S::init_shape(s, a, phase, facts);
    else
      return init_grid{facts.sm_count * 4, 256};
  }
};

}  // namespace gpualloc
