// AWMalloc, AtomicWrapMalloc (Vinkler & Havran, "Register Efficient Memory
// Allocator for GPUs", CGF 2015, section 4.1, Algorithm 2): AtomicMalloc's
// bump pointer over a circular pool. A request that does not fit before the
// end of the arena wraps: a CAS moves the pointer back to the start, claiming
// the first bytes. free is a no-op.
//
// NOT A SAFE ALLOCATOR (registry: reuse_policy::unsafe). After a wrap it
// hands out memory that may still be in use, exactly as the paper says;
// it is correct only for programs whose live memory at any time, plus one
// request, fits the arena (allocations used briefly, "ring buffer" style).
// It never returns NULL except for a request larger than the arena.
//
// Coalesced: the lanes of a group sum their sizes (prefix sum) and the leader
// runs Algorithm 2 once for the whole group; when the group's sum exceeds the
// arena, each lane runs it on its own.
//
// Invariant: every offset handed out lies in [0, arena) with its request;
// `next` is the end of the last bump (it may lie past the arena while a wrap
// is pending). Memory ordering: relaxed; the allocator publishes no data, and
// ordering between a block's old and new users is the program's business.
// Offsets are 64-bit byte offsets (no heap size limit).
#pragma once

#include <cstdint>

#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"

namespace gpualloc::strategies {

struct atomic_wrap {
  struct state {
    std::uint64_t next;  // arena offset where the next bump starts (may exceed the arena)
  };

  static constexpr int init_phases = 0;  // the planned (value-initialised) state starts at offset 0

  GPUALLOC_HD static void init(state&, const arena&, int, std::uint64_t, std::uint64_t) {}

  GPUALLOC_HD static void* malloc(state& s, const arena& a, std::uint64_t bytes, const detail::lane_group& group) {
    const std::uint64_t pool = a.bytes & ~std::uint64_t{15};
    std::uint64_t group_bytes;
    const std::uint64_t offset = group.exclusive_sum(bytes, group_bytes);
    if (group_bytes <= pool) {
      std::uint64_t base = 0;
      if (group.is_leader()) base = bump(s, group_bytes, pool);
      base = group.broadcast(base);
      return a.begin + base + offset;
    }
    if (bytes > pool) return nullptr;
    return a.begin + bump(s, bytes, pool);
  }

  GPUALLOC_HD static void free(state&, const arena&, void*, const detail::lane_group&) {}

 private:
  // Algorithm 2 for `size` <= `pool` bytes; returns the offset of [offset, offset + size).
  GPUALLOC_HD static std::uint64_t bump(state& s, std::uint64_t size, std::uint64_t pool) {
    detail::device_atomic<std::uint64_t> next(s.next);
    std::uint64_t offset = next.fetch_add(size, detail::relaxed);
    for (;;) {
      if (offset <= pool && size <= pool - offset) return offset;
      // Past the end: wrap to the start, claiming [0, size), from whatever past-the-end value the pointer holds now.
      std::uint64_t seen = offset + size;
      for (;;) {
        if (next.compare_exchange_weak(seen, size, detail::relaxed, detail::relaxed)) return 0;
        if (seen <= pool && size <= pool - seen) break;  // another thread wrapped: bump normally
      }
      offset = next.fetch_add(size, detail::relaxed);
    }
  }
};

}  // namespace gpualloc::strategies
