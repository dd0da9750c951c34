// Where a timed kernel's blocks come from. Every timed kernel of
// gpualloc-bench-alloc is a template over its source, so the measured kernel
// and its baselines share one body and differ only here:
//
//   heap_source    malloc/free: the device heap, i.e. the strategy that
//                  GPUALLOC_STRATEGY names (what is measured)
//   packed_source  "no-alloc": no allocation at all; each block is computed
//                  from the thread's position, laid out as a warp-aggregated
//                  bump pointer lays blocks out (each warp's blocks
//                  contiguous), so only the allocator's work is missing
//   bump_source    "bump": a hand-written warp-aggregated bump pointer (one
//                  atomicAdd per warp, offsets from a prefix sum in the warp)
//                  on a cudaMalloc'd buffer, no gpualloc code at all: the
//                  floor an allocator that serves a warp with one atomic can
//                  reach. With per_lane set (GPUALLOC_COALESCE=0 in the
//                  environment) every lane does its own atomicAdd.
//
// take(region, bytes) serves a request whose size may differ per lane;
// take_uniform(region, bytes) one whose size the caller passes as a kernel
// argument, the same in every lane (what the compiler can prove uniform).
// `region` names the part of the baselines' buffers that this warp's
// requests at this call may use, 32 * stride bytes (the kernel numbers them:
// the warp's index, and the call's round where a thread calls more than once).
//
// Lanes that call together are found with activemask. A warp may reach a
// call site in several groups (independent thread scheduling); each group
// must still get disjoint blocks. bump_source gives each group its own
// atomicAdd. packed_source packs only a group that holds lanes 0..k-1 (the
// usual case: every lane, or the first lanes of the grid's last warp); any
// other group, which cannot contain lane 0, takes lane * stride, beyond
// where the packed group ends (at most k * stride).
#pragma once

#include <cstdint>

namespace bench {

__device__ inline unsigned lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

// The lanes executing this call together. Volatile with a memory clobber, so
// the compiler cannot move the read across the caller's atomics.
__device__ inline unsigned active_lanes() {
  unsigned mask;
  asm volatile("activemask.b32 %0;" : "=r"(mask)::"memory");
  return mask;
}

// mask is lanes 0..k-1 for some k >= 1.
__device__ inline bool is_prefix_mask(unsigned mask) { return (mask & 1u) && (mask & (mask + 1u)) == 0; }

__host__ __device__ inline unsigned long long round16(unsigned long long n) { return (n + 15) / 16 * 16; }

// Sum of v over the lanes of `mask` below this one; total over all of them.
__device__ inline unsigned long long exclusive_sum(unsigned mask, unsigned long long v, unsigned long long& total) {
  const unsigned lane = lane_id();
  if (is_prefix_mask(mask)) {  // Kogge-Stone: every source lane below is in the mask
    unsigned long long inclusive = v;
    for (unsigned d = 1; d < 32; d *= 2) {
      unsigned long long up = __shfl_up_sync(mask, inclusive, d);
      if (lane >= d) inclusive += up;
    }
    total = __shfl_sync(mask, inclusive, 31 - __clz(mask));
    return inclusive - v;
  }
  unsigned long long below = 0, sum = 0;  // any other mask: one shuffle per lane of it
  for (unsigned m = mask; m != 0; m &= m - 1) {
    const unsigned src = __ffs(m) - 1;
    const unsigned long long x = __shfl_sync(mask, v, src);
    if (src < lane) below += x;
    sum += x;
  }
  total = sum;
  return below;
}

struct heap_source {
  __device__ void* take(unsigned long long, unsigned long long bytes) const { return malloc(bytes); }
  __device__ void* take_uniform(unsigned long long, unsigned long long bytes) const { return malloc(bytes); }
  __device__ void give_back(void* p) const { free(p); }
};

struct packed_source {
  char* base = nullptr;
  unsigned long long stride = 0;  // the largest block of the test, rounded to 16

  // A zero-byte request gets nothing (and keeps the size computation live).
  __device__ void* take(unsigned long long region, unsigned long long bytes) const {
    if (bytes == 0) return nullptr;
    const unsigned mask = active_lanes();
    char* warp_base = base + region * 32 * stride;
    if (!is_prefix_mask(mask)) return warp_base + lane_id() * stride;
    unsigned long long total;
    return warp_base + exclusive_sum(mask, round16(bytes), total);
  }
  __device__ void* take_uniform(unsigned long long region, unsigned long long bytes) const {
    if (bytes == 0) return nullptr;
    const unsigned lane = lane_id();  // in a prefix group a lane's rank is its lane
    const unsigned long long offset = is_prefix_mask(active_lanes()) ? lane * round16(bytes) : lane * stride;
    return base + region * 32 * stride + offset;
  }
  __device__ void give_back(void*) const {}
};

struct bump_source {
  char* base = nullptr;
  unsigned long long capacity = 0;
  unsigned long long* top = nullptr;  // bytes handed out; the host zeroes it between kernels
  int per_lane = 0;

  __device__ void* take(unsigned long long, unsigned long long bytes) const {
    if (bytes == 0) return nullptr;
    const unsigned long long need = round16(bytes);
    if (per_lane) return claim(atomicAdd(top, need), need, 0);
    const unsigned mask = active_lanes();
    unsigned long long total;
    const unsigned long long offset = exclusive_sum(mask, need, total);
    return claim(leader_add(mask, total), total, offset);
  }
  __device__ void* take_uniform(unsigned long long, unsigned long long bytes) const {
    if (bytes == 0) return nullptr;
    const unsigned long long need = round16(bytes);
    if (per_lane) return claim(atomicAdd(top, need), need, 0);
    const unsigned mask = active_lanes();
    const unsigned rank = __popc(mask & ((1u << lane_id()) - 1u));
    return claim(leader_add(mask, __popc(mask) * need), __popc(mask) * need, rank * need);
  }
  __device__ void give_back(void*) const {}

 private:
  // The group's lowest lane adds the group's bytes; every lane gets the old top.
  __device__ unsigned long long leader_add(unsigned mask, unsigned long long total) const {
    const unsigned leader = __ffs(mask) - 1;
    unsigned long long old = 0;
    if (lane_id() == leader) old = atomicAdd(top, total);
    return __shfl_sync(mask, old, leader);
  }
  // The group's range [old, old + total) must fit: all or none of it is served.
  __device__ void* claim(unsigned long long old, unsigned long long total, unsigned long long offset) const {
    return old + total <= capacity ? base + old + offset : nullptr;
  }
};

}  // namespace bench
