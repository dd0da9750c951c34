// lane_group's operations on the device, against a reference on the host:
// warps with random active lanes, split by random keys, some of whose
// sub-groups leave before the operation (partition(key, goes_on)).
// Checked: partition's masks and ranks, union_to_leader_across on each
// group's leader, exclusive_sum and any_across.
//
// REQUIRES: cuda-gpu
// RUN: %gpu-bin/lane_groups
#include <bit>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "Inputs/check.h"
#include "gpualloc/detail/warp.h"

namespace {

using gpualloc::detail::lane_group;

constexpr unsigned warps = 4096;
constexpr unsigned leaving_key = 3;  // lanes with this key return before the operations

struct lane_in {
  std::uint64_t value;
  unsigned key;
};

struct lane_out {
  unsigned mask, rank;
  std::uint64_t union_bits;  // the leader's
  std::uint64_t before, total;
  bool any;
};

__global__ void run(const unsigned* active, const lane_in* in, lane_out* out) {
  const unsigned warp = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const unsigned lane = threadIdx.x % 32, t = warp * 32 + lane;
  if (!(active[warp] >> lane & 1u)) return;
  const bool goes_on = in[t].key != leaving_key;
  const lane_group g = lane_group::coalesced().partition(in[t].key, goes_on);
  if (!goes_on) return;
  const std::uint64_t u = g.union_to_leader_across(in[t].value);
  std::uint64_t total = 0;
  const std::uint64_t before = g.exclusive_sum(in[t].value, total);
  const bool any = g.any_across(in[t].value % 5 == 0);
  out[t] = {g.mask(), g.rank(), g.is_leader() ? u : 0, before, total, any};
}

}  // namespace

int main() {
  std::mt19937_64 rng(2026);
  std::vector<unsigned> active(warps);
  std::vector<lane_in> in(warps * 32);
  for (unsigned w = 0; w < warps; ++w) {
    // Every shape: whole warps of one key (the butterfly), single lanes, random subsets and keys.
    const unsigned shape = w % 4;
    active[w] = shape == 0 ? ~0u : static_cast<unsigned>(rng()) | (shape == 1 ? 0u : 1u << (rng() % 32));
    if (shape == 3) active[w] &= static_cast<unsigned>(rng());
    if (active[w] == 0) active[w] = 1;
    const unsigned keys = shape == 0 ? 1 : 1 + static_cast<unsigned>(rng() % 5);
    for (unsigned l = 0; l < 32; ++l) {
      const std::uint64_t bits = rng() & rng();  // sparse, as free's bits are
      in[w * 32 + l] = {w % 8 == 0 ? std::uint64_t{1} << (l * 2 + w / 8 % 2) : bits,
                        shape == 0 ? 0u : static_cast<unsigned>(rng() % keys)};
    }
  }
  unsigned* d_active;
  lane_in* d_in;
  lane_out* d_out;
  CHECK(cudaMalloc(&d_active, warps * sizeof(unsigned)));
  CHECK(cudaMalloc(&d_in, in.size() * sizeof(lane_in)));
  CHECK(cudaMalloc(&d_out, in.size() * sizeof(lane_out)));
  CHECK(cudaMemcpy(d_active, active.data(), warps * sizeof(unsigned), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_in, in.data(), in.size() * sizeof(lane_in), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_out, 0, in.size() * sizeof(lane_out)));
  run<<<warps / 8, 256>>>(d_active, d_in, d_out);
  SYNC_CHECK();
  std::vector<lane_out> out(in.size());
  CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(lane_out), cudaMemcpyDeviceToHost));

  unsigned groups = 0, partial = 0;
  for (unsigned w = 0; w < warps; ++w) {
    unsigned going = 0;
    for (unsigned l = 0; l < 32; ++l)
      if ((active[w] >> l & 1u) && in[w * 32 + l].key != leaving_key) going |= 1u << l;
    bool any = false;
    for (unsigned l = 0; l < 32; ++l)
      if (going >> l & 1u) any = any || in[w * 32 + l].value % 5 == 0;
    for (unsigned l = 0; l < 32; ++l) {
      if (!(going >> l & 1u)) continue;
      const lane_in& me = in[w * 32 + l];
      unsigned same = 0;
      std::uint64_t all = 0, before = 0, total = 0;
      for (unsigned o = 0; o < 32; ++o) {
        if (!(going >> o & 1u) || in[w * 32 + o].key != me.key) continue;
        same |= 1u << o;
        all |= in[w * 32 + o].value;
        total += in[w * 32 + o].value;
        if (o < l) before += in[w * 32 + o].value;
      }
      const lane_out& got = out[w * 32 + l];
      const unsigned rank = std::popcount(same & ((1u << l) - 1));
      EXPECT(got.mask == same && got.rank == rank, "warp %u lane %u: mask %08x rank %u, expected %08x rank %u", w, l,
             got.mask, got.rank, same, rank);
      if (rank == 0) {
        EXPECT(got.union_bits == all, "warp %u lane %u (mask %08x of %08x): union %016llx, expected %016llx", w, l,
               same, going, (unsigned long long)got.union_bits, (unsigned long long)all);
        ++groups;
        partial += same != ~0u;
      }
      EXPECT(got.before == before && got.total == total, "warp %u lane %u: exclusive_sum", w, l);
      EXPECT(got.any == any, "warp %u lane %u: any_across", w, l);
    }
  }
  std::printf("lane_groups: %u groups (%u not the whole warp) checked\n", groups, partial);
  return 0;
}
