// Groups of lanes that call the allocator together.
//
// A lane_group is a set of lanes of one warp that execute the same call at
// the same time: the coalescing layer forms one from the active lanes and
// strategies may split it further (by size class, say) and let one leader do
// the shared work. On the host a group is always a single lane, so the same
// strategy code runs per thread there.
//
// Invariant: every lane in `mask` executes the same sequence of group
// operations; each operation is a warp-synchronous primitive over `mask`.
// Use a group only while its lanes are still together: once they have taken
// different paths (a spin loop, different returns), the compiler may give each
// path its own copy of a later group operation, and lanes at different copies
// exchange garbage. Seen on an H200: statistics counted with group sums after
// the circular strategies' lock loops came out wrong; counted per lane, exact.
//
// How the group is formed is the call site's choice (allocate.h):
// coalesced() takes every active lane, and a strategy partitions it by size
// class; coalesced_same_size() does the same where the compiler proved the
// request size warp-uniform, so partition() has nothing to split; single()
// is one lane alone (coalescing turned off).
#pragma once

#include <cstdint>

#include "gpualloc/config.h"

namespace gpualloc::detail {

class lane_group {
 public:
  // The lanes that are active at this call site right now (on the host: this thread).
  //
  // The mask is read with a volatile asm that clobbers memory, so the
  // compiler cannot move the read past the strategy's atomics and spin loops
  // (__activemask() is only `convergent`, which allows sinking it below a
  // loop): read after lanes diverged, each lane would see another group.
  GPUALLOC_HD static lane_group coalesced() {
#if GPUALLOC_ON_DEVICE
    unsigned mask;
    asm volatile("activemask.b32 %0;" : "=r"(mask)::"memory");
    return lane_group(mask, false);
#else
    return lane_group(1u, false);
#endif
  }

  // The active lanes, all asking for the same size (the caller knows it).
  GPUALLOC_HD static lane_group coalesced_same_size() {
    lane_group g = coalesced();
    g.same_size_ = true;
    return g;
  }

  // This lane alone.
  GPUALLOC_HD static lane_group single() {
#if GPUALLOC_ON_DEVICE
    unsigned self;
    asm("mov.u32 %0, %%lanemask_eq;" : "=r"(self));
    return lane_group(self, true);
#else
    return lane_group(1u, true);
#endif
  }

  // The sub-group of lanes whose `key` equals this lane's. `key` must be a
  // function of the request size: a same-size group is its own partition.
  GPUALLOC_HD lane_group partition(std::uint64_t key) const {
#if GPUALLOC_ON_DEVICE
    if (same_size_) return *this;
    return lane_group(__match_any_sync(mask_, (unsigned long long)key), false);
#else
    (void)key;
    return *this;
#endif
  }

  // Every lane of the group asks for the same size.
  GPUALLOC_HD bool same_size() const { return same_size_; }

  GPUALLOC_HD unsigned size() const { return size_; }
  GPUALLOC_HD unsigned rank() const { return rank_; }
  GPUALLOC_HD bool is_leader() const { return rank_ == 0; }
  GPUALLOC_HD unsigned mask() const { return mask_; }

  // The leader's value, on every lane.
  GPUALLOC_HD std::uint64_t broadcast(std::uint64_t v) const {
#if GPUALLOC_ON_DEVICE
    return __shfl_sync(mask_, (unsigned long long)v, leader_lane_);
#else
    return v;
#endif
  }

  template <class T>
  GPUALLOC_HD T* broadcast(T* p) const {
    return reinterpret_cast<T*>(broadcast(reinterpret_cast<std::uint64_t>(p)));
  }

  // The value of the lane with the given rank in this group, on every lane.
  GPUALLOC_HD std::uint64_t shuffle_from_rank(std::uint64_t v, unsigned src_rank) const {
#if GPUALLOC_ON_DEVICE
    return __shfl_sync(mask_, (unsigned long long)v, __fns(mask_, 0, (int)src_rank + 1));
#else
    (void)src_rank;
    return v;
#endif
  }

  // Sum of `v` over the lanes ranked before this one; `total` gets the sum over the group.
  GPUALLOC_HD std::uint64_t exclusive_sum(std::uint64_t v, std::uint64_t& total) const {
#if GPUALLOC_ON_DEVICE
    if (size_ == 1) {
      total = v;
      return 0;
    }
    unsigned lane;  // %laneid: what masks index, in 1-D and multi-D blocks alike
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    std::uint64_t inclusive = v;
    if (mask_ == 0xffffffffu) {
      for (int d = 1; d < 32; d *= 2) {
        std::uint64_t up = __shfl_up_sync(mask_, (unsigned long long)inclusive, d);
        if ((int)lane >= d) inclusive += up;
      }
      total = __shfl_sync(mask_, (unsigned long long)inclusive, 31);
      return inclusive - v;
    }
    std::uint64_t before = 0, sum = 0;
    for (unsigned m = mask_; m != 0; m &= m - 1) {
      int src = __ffs(m) - 1;
      std::uint64_t x = __shfl_sync(mask_, (unsigned long long)v, src);
      if (src < (int)lane) before += x;
      sum += x;
    }
    total = sum;
    return before;
#else
    total = v;
    return 0;
#endif
  }

 private:
  GPUALLOC_HD lane_group(unsigned mask, bool same_size) : mask_(mask), same_size_(same_size) {
#if GPUALLOC_ON_DEVICE
    unsigned lanes_below;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lanes_below));
    rank_ = __popc(mask & lanes_below);
    size_ = __popc(mask);
    leader_lane_ = __ffs(mask) - 1;
#else
    rank_ = 0;
    size_ = 1;
    leader_lane_ = 0;
#endif
  }

  unsigned mask_;
  bool same_size_;
  unsigned rank_;
  unsigned size_;
  unsigned leader_lane_;
};

}  // namespace gpualloc::detail
