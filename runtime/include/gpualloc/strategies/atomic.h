// AtomicMalloc (Vinkler & Havran, "Register Efficient Memory Allocator for
// GPUs", CGF 2015, Algorithm 1): a bump pointer advanced with one atomicAdd
// per request; free is a no-op and memory is never reused.
//
// Coalesced: the lanes of a group add their sizes with a prefix sum and the
// leader advances the pointer once for all of them (one atomic per warp).
//
// Invariant: `next` only grows, and every block handed out lies below
// min(next, arena). A request that does not fit before the end returns NULL.
// Once `next` has reached the end it no longer moves: later requests return
// NULL without adding to it, and the heap stays full, as in the paper. (The
// paper adds on every request: a program that retries on a full heap would
// grow `next` until it wraps 64 bits and hands out live memory.) `next`
// overshoots the end only by the groups whose leader read it below the end
// while it crossed. A single request larger than the whole arena takes no
// part in the bump.
//
// Memory ordering: relaxed. Memory is handed out once and never comes back,
// so no block has an earlier owner to be ordered after; the leader passes the
// base to its lanes by broadcast, which needs no ordering either.
#pragma once

#include <cstdint>

#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"

namespace gpualloc::strategies {

struct atomic_bump {
  struct state {
    std::uint64_t next;  // arena offset of the first byte not yet handed out
  };

  static constexpr int init_phases = 0;  // the planned (value-initialised) state starts at offset 0

  GPUALLOC_HD static void init(state&, const arena&, int, std::uint64_t, std::uint64_t) {}

  GPUALLOC_HD static void* malloc(state& s, const arena& a, std::uint64_t bytes, const detail::lane_group& group) {
    // A request larger than the arena takes no part in the bump, so it cannot
    // push the pointer past the end for everyone else.
    const bool fits = bytes <= a.bytes;
    std::uint64_t group_bytes;
    std::uint64_t offset = group.exclusive_sum(fits ? bytes : 0, group_bytes);
    std::uint64_t base = 0;
    if (group.is_leader()) {
      detail::device_atomic<std::uint64_t> next(s.next);
      base = next.load(detail::relaxed);
      if (base < a.bytes) base = next.fetch_add(group_bytes, detail::relaxed);
    }
    base = group.broadcast(base);
    std::uint64_t begin = base + offset;
    if (!fits || begin > a.bytes || bytes > a.bytes - begin) return nullptr;
    return a.begin + begin;
  }

  GPUALLOC_HD static void free(state&, const arena&, void*, const detail::lane_group&) {}
};

}  // namespace gpualloc::strategies
