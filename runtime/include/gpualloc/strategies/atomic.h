// AtomicMalloc (Vinkler & Havran, "Register Efficient Memory Allocator for
// GPUs", CGF 2015, Algorithm 1): a bump pointer advanced with one atomicAdd
// per request; free is a no-op and memory is never reused.
//
// Coalesced: the lanes of a group add their sizes with a prefix sum and the
// leader advances the pointer once for all of them (one atomic per warp).
//
// Invariant: below the end of the arena `next` only grows, and every block
// handed out lies below min(next, arena). A request that does not fit before
// the end returns NULL, and the heap stays full, as in the paper. Past the end
// nothing is handed out, so a value there only means "full": a group whose
// whole range lay past the end takes its bytes back (a CAS from the value it
// made, so only if nobody added since), and a leader that finds `next` beyond
// 2^62 sets it back to the end. (The paper adds on every request: a program
// that retries on a full heap would grow `next` until it wraps 64 bits and
// hands out live memory.) Both happen only on the failure path: a request
// that fits costs one fetch_add per group, as in the paper. A single request
// larger than the whole arena takes no part in the bump.
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
  static constexpr std::uint64_t wrap_guard = std::uint64_t{1} << 62;  // far below a 64-bit wrap

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
      base = next.fetch_add(group_bytes, detail::relaxed);
      if (base >= a.bytes) {  // full: undo, or clamp a runaway value back to the end
        std::uint64_t made = base + group_bytes;
        next.compare_exchange_strong(made, base >= wrap_guard ? a.bytes : base, detail::relaxed, detail::relaxed);
      }
    }
    base = group.broadcast(base);
    std::uint64_t begin = base + offset;
    if (!fits || begin > a.bytes || bytes > a.bytes - begin) return nullptr;
    return a.begin + begin;
  }

  GPUALLOC_HD static void free(state&, const arena&, void*, const detail::lane_group&) {}
};

}  // namespace gpualloc::strategies
