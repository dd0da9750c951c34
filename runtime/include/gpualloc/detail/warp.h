// Groups of lanes that call the allocator together.
//
// A lane_group is a set of lanes of one warp that execute the same call at
// the same time: the coalescing layer forms one from the active lanes and
// strategies may split it further (by size class, say) and let one leader do
// the shared work. On the host a thread is a warp of one lane, unless a test
// makes it a lane of a host_warp (detail/host_warp.h), whose threads then
// form groups of up to 32 lanes with the device's semantics, so the same
// strategy code runs there, plain and under ThreadSanitizer.
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
// request size warp-uniform at the call site, so partition() usually has
// nothing to split; single() is one lane alone (coalescing turned off).
//
// A same-size group is only a hint. The same-size entry is one function, and
// lanes of two divergent call sites, each with its own uniform size, can run
// it together (seen on an H100: Gallatin handed out an 80-byte block and a
// 16-byte one 64 bytes into it). So partition() of a same-size group checks
// that every lane has the leader's key (one shuffle and one vote, cheaper
// than a match) and splits the group like any other when one does not.
//
// Memory ordering: partition, broadcast, shuffle_from_rank, exclusive_sum,
// union_to_leader_across and all move values, not memory (no fence, on the
// host too: host_warp.h). sync() (__syncwarp) orders memory among the
// group's lanes: a lane that uses memory the leader acquired for it needs
// sync() after the leader's acquire, or an acquire of its own.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"

#if !GPUALLOC_ON_DEVICE
#include <bit>

#include "gpualloc/detail/host_warp.h"
#endif

namespace gpualloc::detail {

class lane_group {
 public:
  // The lanes that are active at this call site right now (on the host: the
  // calling lane's active mask, host_warp::active).
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
    return lane_group(host_warp::active_mask(), false);
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
    return lane_group(1u << host_warp::lane_id(), true);
#endif
  }

  // The sub-group of lanes whose `key` equals this lane's. `key` must be a
  // function of the request size: a same-size group whose lanes all have the
  // leader's key is its own partition.
  GPUALLOC_HD lane_group partition(std::uint64_t key) const {
#if GPUALLOC_ON_DEVICE
    if (same_size_) {
      const auto leaders = __shfl_sync(mask_, (unsigned long long)key, leader_lane_);
      if (__all_sync(mask_, leaders == key)) return *this;
    }
    return lane_group(__match_any_sync(mask_, (unsigned long long)key), false);
#else
    if (size_ == 1) return *this;
    const host_values keys = gather(host_warp::op::partition, key);
    if (same_size_) {
      bool all_leaders = true;
      for (unsigned m = mask_; m != 0; m &= m - 1) all_leaders &= keys.of[std::countr_zero(m)] == keys.of[leader_lane_];
      if (all_leaders) return *this;
    }
    unsigned same = 0;
    for (unsigned m = mask_; m != 0; m &= m - 1)
      if (keys.of[std::countr_zero(m)] == key) same |= 1u << std::countr_zero(m);
    return lane_group(same, false);
#endif
  }
  // As partition(key), where the lanes for which `goes_on` holds (alike on
  // every lane of a sub-group) go on together: their sub-groups make the
  // same group operations at the same time, so each *_across operation is
  // one warp operation for all of them. (A shuffle or barrier made by
  // sub-groups of different masks runs once per mask: SASS loops over the
  // masks, WARPSYNC.COLLECTIVE. 2^20 requests of 16 B - 8 KiB, ten size
  // classes, spent 44 % of their stall samples there: sm-slab, ncu, H200.)
  GPUALLOC_HD lane_group partition(std::uint64_t key, bool goes_on) const {
    lane_group g = partition(key);
#if GPUALLOC_ON_DEVICE
    g.across_ = __ballot_sync(mask_, goes_on);
#else
    unsigned across = goes_on ? 1u << host_warp::lane_id() : 0;
    if (size_ > 1) {
      const host_values going = gather(host_warp::op::ballot, goes_on);
      for (unsigned m = mask_; m != 0; m &= m - 1)
        if (going.of[std::countr_zero(m)] != 0) across |= 1u << std::countr_zero(m);
    }
    g.across_ = across;
#endif
    return g;
  }

  // Every lane of the group was said to ask for the same size (a hint: see partition).
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
    return size_ == 1 ? v : gather(host_warp::op::broadcast, v).of[leader_lane_];
#endif
  }

  // The same, made by this group together with every other sub-group of its
  // partition that went on (partition(key, goes_on)).
  GPUALLOC_HD std::uint64_t broadcast_across(std::uint64_t v) const {
#if GPUALLOC_ON_DEVICE
    return __shfl_sync(across_, (unsigned long long)v, leader_lane_);
#else
    return across_ == 1u << host_warp::lane_id() ? v : gather(host_warp::op::broadcast, v, across_).of[leader_lane_];
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
    if (src_rank >= size_) host_warp::fail("shuffle_from_rank from a rank outside the group");
    if (size_ == 1) return v;
    unsigned m = mask_;  // drop the lanes of lower rank
    for (unsigned r = 0; r < src_rank; ++r) m &= m - 1;
    return gather(host_warp::op::shuffle_from_rank, v).of[std::countr_zero(m)];
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
    if (size_ == 1) {
      total = v;
      return 0;
    }
    const host_values values = gather(host_warp::op::exclusive_sum, v);
    std::uint64_t before = 0, sum = 0;
    for (unsigned m = mask_; m != 0; m &= m - 1) {
      const unsigned src = std::countr_zero(m);
      if (src < host_warp::lane_id()) before += values.of[src];
      sum += values.of[src];
    }
    total = sum;
    return before;
#endif
  }

  // The union (bitwise or) of `v` over the group, on its leader (the other
  // lanes get part of it; the host gives them 0), made together with every
  // other sub-group of its partition that went on (partition(key,
  // goes_on)). Five rounds, each one shuffle for all those lanes: a lane
  // ors in what the lane 2^round ranks above it in its group holds, and
  // learns the lane 2^(round+1) above from that one (pointer jumping). (The
  // sum of a group that is not the whole warp is a shuffle per lane, which
  // groups of different masks make one mask after another.) A group of the
  // whole warp takes a butterfly.
  GPUALLOC_HD std::uint64_t union_to_leader_across(std::uint64_t v) const {
#if GPUALLOC_ON_DEVICE
    if (mask_ == 0xffffffffu) {
      for (int d = 1; d < 32; d *= 2) v |= __shfl_xor_sync(mask_, (unsigned long long)v, d);
      return v;
    }
    unsigned lane, above;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    asm("mov.u32 %0, %%lanemask_gt;" : "=r"(above));
    constexpr unsigned none = 32;
    unsigned up = (mask_ & above) == 0 ? none : __ffs(mask_ & above) - 1;  // the lane 2^round ranks above
    for (int round = 0; round < 5; ++round) {
      const unsigned from = up == none ? lane : up;
      const std::uint64_t theirs = __shfl_sync(across_, (unsigned long long)v, from);
      const unsigned their_up = __shfl_sync(across_, up, from);
      if (up != none) v |= theirs, up = their_up;
    }
    return v;
#else
    if (across_ == 1u << host_warp::lane_id()) return v;
    const host_values values = gather(host_warp::op::union_of, v, across_);
    if (!is_leader()) return 0;
    std::uint64_t all = 0;
    for (unsigned m = mask_; m != 0; m &= m - 1) all |= values.of[std::countr_zero(m)];
    return all;
#endif
  }

  // Whether `p` holds on every lane of the group (a vote; moves no memory).
  GPUALLOC_HD bool all(bool p) const {
#if GPUALLOC_ON_DEVICE
    return __all_sync(mask_, p);
#else
    if (size_ == 1) return p;
    const host_values values = gather(host_warp::op::all, p);
    for (unsigned m = mask_; m != 0; m &= m - 1)
      if (values.of[std::countr_zero(m)] == 0) return false;
    return true;
#endif
  }

  // Whether `p` holds on any lane of the sub-groups that go on together
  // (partition(key, goes_on)): a vote of all their lanes; moves no memory.
  GPUALLOC_HD bool any_across(bool p) const {
#if GPUALLOC_ON_DEVICE
    return __any_sync(across_, p);
#else
    if (across_ == 1u << host_warp::lane_id()) return p;
    const host_values votes = gather(host_warp::op::ballot, p, across_);
    for (unsigned m = across_; m != 0; m &= m - 1)
      if (votes.of[std::countr_zero(m)] != 0) return true;
    return false;
#endif
  }

  // A barrier of the group's lanes that orders memory among them (__syncwarp).
  GPUALLOC_HD void sync() const {
#if GPUALLOC_ON_DEVICE
    __syncwarp(mask_);
#else
    if (size_ > 1) gather(host_warp::op::sync, 0);
#endif
  }
  // The same, made together with every other sub-group of its partition
  // that went on (partition(key, goes_on)): a barrier of all their lanes.
  GPUALLOC_HD void sync_across() const {
#if GPUALLOC_ON_DEVICE
    __syncwarp(across_);
#else
    if (across_ != 1u << host_warp::lane_id()) gather(host_warp::op::sync, 0, across_);
#endif
  }

 private:
  GPUALLOC_HD lane_group(unsigned mask, bool same_size) : mask_(mask), across_(mask), same_size_(same_size) {
#if GPUALLOC_ON_DEVICE
    unsigned lanes_below;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lanes_below));
    rank_ = __popc(mask & lanes_below);
    size_ = __popc(mask);
    leader_lane_ = __ffs(mask) - 1;
#else
    rank_ = std::popcount(mask & ((1u << host_warp::lane_id()) - 1));
    size_ = std::popcount(mask);
    leader_lane_ = std::countr_zero(mask);
#endif
  }

#if !GPUALLOC_ON_DEVICE
  // Host: operation `what` of this group (host_warp.h), or of the `lanes`
  // given (across_ for the *_across forms); every lane's `v`, by lane.
  struct host_values {
    std::uint64_t of[host_warp::max_lanes];
  };
  host_values gather(host_warp::op what, std::uint64_t v) const { return gather(what, v, mask_); }
  host_values gather(host_warp::op what, std::uint64_t v, unsigned lanes) const {
    host_values all;
    host_warp::gather(what, lanes, v, all.of);
    return all;
  }
#endif

  unsigned mask_;
  unsigned across_;  // the lanes of the sub-groups that go on together (partition(key, goes_on)); else mask_
  bool same_size_;
  unsigned rank_;
  unsigned size_;
  unsigned leader_lane_;
};

}  // namespace gpualloc::detail
