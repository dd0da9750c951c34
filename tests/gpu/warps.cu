// Warps of every shape: partial warps (blocks of 1, 7, 33, 100 threads),
// chosen lanes of full warps, divergent branches that each call malloc, loops
// that lanes leave after different counts, malloc(0) beside other sizes, a
// different size in every lane, blocks freed by another lane or warp in the
// same kernel, a warp where some lanes free while the others allocate, and
// blocks freed in a later kernel by other threads. Every call site comes in
// two kinds: the size a kernel argument (the compiler can prove it the same
// in every lane: the uniform entry) and a size per lane (the general entry).
//
// Checked: no NULL, every pointer 16-byte aligned, all live blocks disjoint
// (on the host, by address; a malloc(0) block counts as its 16 bytes), every
// block keeps its pattern until it is freed. Twice, so the second pass runs
// on a heap the first one freed into.
//
// The same source runs with warp coalescing on, off at run time
// (GPUALLOC_COALESCE=0) and off at compile time (warps_no_coalesce is built
// with gpualloc-clang++ --gpualloc-no-coalesce).
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_HEAP_SIZE=1G %for-each-strategy --timeout 120 --jobs 4 -- %gpu-bin/warps
// RUN: env GPUALLOC_HEAP_SIZE=1G GPUALLOC_COALESCE=0 %for-each-strategy --timeout 120 --jobs 4 -- %gpu-bin/warps
// RUN: env GPUALLOC_HEAP_SIZE=1G %for-each-strategy --timeout 120 --jobs 4 -- %gpu-bin/warps_no_coalesce
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

#include "Inputs/check.h"

namespace {

// One request: which block, how large, the tag its pattern is made of.
struct record {
  unsigned long long address;
  unsigned size;  // bytes asked for; a malloc(0) block owns 16
  unsigned tag;   // 0: no request was made here (or the block was freed already)
};

__host__ __device__ unsigned extent(unsigned size) { return size == 0 ? 16 : size; }

__host__ __device__ unsigned mix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

__device__ unsigned char pattern(unsigned tag, unsigned i) { return (unsigned char)(tag + i * 7 + (i >> 8)); }

__device__ unsigned lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

__device__ unsigned global_thread() { return blockIdx.x * blockDim.x + threadIdx.x; }

struct errors {
  unsigned long long nulls, misaligned, corrupt;
};

__device__ void write_pattern(void* p, unsigned size, unsigned tag) {
  auto* b = static_cast<unsigned char*>(p);
  for (unsigned i = 0; i < extent(size); ++i) b[i] = pattern(tag, i);
}

__device__ bool has_pattern(const void* p, unsigned size, unsigned tag) {
  auto* b = static_cast<const unsigned char*>(p);
  for (unsigned i = 0; i < extent(size); ++i)
    if (b[i] != pattern(tag, i)) return false;
  return true;
}

// Records what malloc gave and writes the block's pattern.
__device__ void keep(record* r, void* p, unsigned size, unsigned salt) {
  unsigned tag = mix(salt * 0x9e3779b9u + global_thread()) | 1u;
  r->address = reinterpret_cast<unsigned long long>(p);
  r->size = size;
  r->tag = tag;
  if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 == 0) write_pattern(p, size, tag);
}

__device__ void no_request(record* r) { *r = record{0, 0, 0}; }

__device__ unsigned lane_size(unsigned lane, unsigned salt) { return 1 + (lane * 37 + salt * 11) % 300; }

// ---- the shapes -----------------------------------------------------------------

// Every thread of blocks whose size is not a multiple of 32 (the last warp is partial).
template <bool Uniform>
__global__ void partial_blocks(record* out, unsigned size) {
  unsigned t = global_thread();
  if (Uniform) {
    keep(&out[t], malloc(size), size, 1);
  } else {
    unsigned mine = lane_size(lane_id(), blockIdx.x);
    keep(&out[t], malloc(mine), mine, 2);
  }
}

__device__ bool chosen(unsigned which, unsigned lane) {
  switch (which) {
    case 0: return lane % 3 == 0;
    case 1: return lane >= 20;
    case 2: return lane == 31;
    case 3: return (lane & 5) == 0;
    default: return lane != 0;
  }
}
constexpr unsigned choices = 5;

// Some lanes of full warps.
template <bool Uniform>
__global__ void chosen_lanes(record* out, unsigned which, unsigned size) {
  unsigned t = global_thread(), lane = lane_id();
  if (!chosen(which, lane)) {
    no_request(&out[t]);
    return;
  }
  if (Uniform) {
    keep(&out[t], malloc(size), size, 3 + which);
  } else {
    unsigned mine = lane_size(lane, which);
    keep(&out[t], malloc(mine), mine, 8 + which);
  }
}

// Two branches of one warp, each with its own call site (the asm statements
// at the branches' ends keep the compiler from sinking the two calls into one
// after the branch).
__global__ void two_branches(record* out, unsigned size_a, unsigned size_b) {
  unsigned t = global_thread();
  if (lane_id() & 1) {
    keep(&out[t], malloc(size_a), size_a, 13);
    asm volatile("// end of branch a" ::: "memory");
  } else {
    keep(&out[t], malloc(size_b), size_b, 14);
    asm volatile("// end of branch b" ::: "memory");
  }
}

// Four branches, a size per lane in each: 8-39 B, 100-193 B, 1000-1961 B, 4065-4096 B.
__global__ void four_branches(record* out) {
  unsigned t = global_thread(), lane = lane_id(), size;
  switch (lane % 4) {
    case 0:
      size = 8 + lane;
      keep(&out[t], malloc(size), size, 15);
      asm volatile("// end of branch 0" ::: "memory");
      break;
    case 1:
      size = 100 + 3 * lane;
      keep(&out[t], malloc(size), size, 16);
      asm volatile("// end of branch 1" ::: "memory");
      break;
    case 2:
      size = 1000 + 31 * lane;
      keep(&out[t], malloc(size), size, 17);
      asm volatile("// end of branch 2" ::: "memory");
      break;
    default:
      size = 4096 - lane;
      keep(&out[t], malloc(size), size, 18);
      asm volatile("// end of branch 3" ::: "memory");
      break;
  }
}

// Lane l allocates l % 5 + 1 times: later iterations run with fewer lanes.
constexpr unsigned loop_max = 5;
template <bool Uniform>
__global__ void uneven_loops(record* out, unsigned size) {
  unsigned t = global_thread(), lane = lane_id(), count = lane % loop_max + 1;
  for (unsigned i = 0; i < loop_max; ++i) {
    record* r = &out[t * loop_max + i];
    if (i >= count) {
      no_request(r);
      continue;
    }
    if (Uniform) {
      keep(r, malloc(size), size, 16 + i);
    } else {
      unsigned mine = 16 * i + lane * 3 + 1;
      keep(r, malloc(mine), mine, 21 + i);
    }
  }
}

// malloc(0) in every lane, and in half the lanes beside 24-byte requests.
__global__ void zero_sizes(record* out, int everywhere) {
  unsigned t = global_thread();
  if (everywhere) {
    keep(&out[t], malloc(0), 0, 26);
  } else if (lane_id() & 1) {
    keep(&out[t], malloc(24), 24, 27);
    asm volatile("// end of odd lanes" ::: "memory");
  } else {
    keep(&out[t], malloc(0), 0, 28);
    asm volatile("// end of even lanes" ::: "memory");
  }
}

// Each thread allocates; after the barrier it checks and frees the block of
// the next thread of its block (another lane, or the first lane of the next warp).
constexpr unsigned neighbour_block_max = 128;
template <bool Uniform>
__global__ void free_by_neighbour(errors* e, unsigned uniform_size) {
  __shared__ unsigned long long blocks[neighbour_block_max];
  __shared__ unsigned sizes[neighbour_block_max], tags[neighbour_block_max];
  unsigned me = threadIdx.x, size = Uniform ? uniform_size : lane_size(lane_id(), blockIdx.x);
  void* p = Uniform ? malloc(uniform_size) : malloc(size);
  unsigned tag = mix(global_thread() * 0x85ebca6bu + 29) | 1u;
  if (p == nullptr) atomicAdd(&e->nulls, 1ull);
  else if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) atomicAdd(&e->misaligned, 1ull);
  else write_pattern(p, size, tag);
  blocks[me] = reinterpret_cast<unsigned long long>(p);
  sizes[me] = size;
  tags[me] = tag;
  __syncthreads();
  unsigned from = (me + 1) % blockDim.x;
  auto* q = reinterpret_cast<void*>(blocks[from]);
  if (q != nullptr && reinterpret_cast<std::uintptr_t>(q) % 16 == 0 && !has_pattern(q, sizes[from], tags[from]))
    atomicAdd(&e->corrupt, 1ull);
  free(q);
}

// Even lanes check and free a block an earlier kernel gave them while odd
// lanes allocate: malloc and free in one warp at the same time.
__global__ void free_while_others_allocate(record* earlier, record* out, errors* e) {
  unsigned t = global_thread(), lane = lane_id();
  if (lane & 1) {
    unsigned size = lane_size(lane, 31);
    keep(&out[t], malloc(size), size, 31);
  } else {
    record r = earlier[t];
    auto* p = reinterpret_cast<void*>(r.address);
    if (p != nullptr && r.address % 16 == 0 && !has_pattern(p, r.size, r.tag)) atomicAdd(&e->corrupt, 1ull);
    free(p);
    no_request(&earlier[t]);
    no_request(&out[t]);
  }
}

// ---- checks ---------------------------------------------------------------------

__global__ void verify(const record* all, unsigned long long count, errors* e) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    record r = all[i];
    if (r.tag == 0) continue;
    if (r.address == 0) atomicAdd(&e->nulls, 1ull);
    else if (r.address % 16 != 0) atomicAdd(&e->misaligned, 1ull);
    else if (!has_pattern(reinterpret_cast<const void*>(r.address), r.size, r.tag)) atomicAdd(&e->corrupt, 1ull);
  }
}

// Frees every block in a later kernel, each by a thread other than the one
// that allocated it: thread i takes record (i * stride + 13) % count, a
// permutation because stride and count are coprime.
__global__ void release_elsewhere(record* all, unsigned long long count, unsigned long long stride) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < count;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned long long j = (i * stride + 13) % count;
    if (all[j].tag != 0) free(reinterpret_cast<void*>(all[j].address));
    all[j] = record{0, 0, 0};
  }
}

// ---- host -----------------------------------------------------------------------

// The record table: each shape takes the next range.
struct records {
  record* device = nullptr;
  unsigned long long capacity = 0, used = 0;
  record* take(unsigned long long n) {
    EXPECT(used + n <= capacity, "record table too small (%llu + %llu > %llu)", used, n, capacity);
    record* r = device + used;
    used += n;
    return r;
  }
};

void expect_no_errors(const errors& e, const char* what, int pass) {
  EXPECT(e.nulls == 0, "pass %d, %s: %llu requests got NULL", pass, what, e.nulls);
  EXPECT(e.misaligned == 0, "pass %d, %s: %llu blocks not 16-byte aligned", pass, what, e.misaligned);
  EXPECT(e.corrupt == 0, "pass %d, %s: %llu blocks lost their pattern (overwritten by another block)", pass, what,
         e.corrupt);
}

void one_pass(int pass, records& table, errors* e) {
  table.used = 0;
  CHECK(cudaMemset(table.device, 0, table.capacity * sizeof(record)));
  const unsigned grid = 24;

  for (unsigned threads : {1u, 7u, 33u, 100u}) {
    partial_blocks<true><<<grid, threads>>>(table.take(grid * threads), 48);
    partial_blocks<false><<<grid, threads>>>(table.take(grid * threads), 0);
  }
  for (unsigned which = 0; which < choices; ++which) {
    chosen_lanes<true><<<grid, 128>>>(table.take(grid * 128), which, 16 + 16 * which);
    chosen_lanes<false><<<grid, 128>>>(table.take(grid * 128), which, 0);
  }
  two_branches<<<grid, 128>>>(table.take(grid * 128), 40, 2000);
  two_branches<<<grid, 48>>>(table.take(grid * 48), 16, 16);
  four_branches<<<grid, 128>>>(table.take(grid * 128));
  four_branches<<<grid, 100>>>(table.take(grid * 100));
  uneven_loops<true><<<grid, 128>>>(table.take(grid * 128 * loop_max), 64);
  uneven_loops<false><<<grid, 100>>>(table.take(grid * 100 * loop_max), 0);
  zero_sizes<<<grid, 128>>>(table.take(grid * 128), 1);
  zero_sizes<<<grid, 100>>>(table.take(grid * 100), 0);
  SYNC_CHECK();

  *e = errors{};
  free_by_neighbour<false><<<grid, 96>>>(e, 0);
  free_by_neighbour<false><<<grid, 48>>>(e, 0);
  free_by_neighbour<true><<<grid, 128>>>(e, 200);
  free_by_neighbour<true><<<grid, 33>>>(e, 0);  // malloc(0) in partial warps
  SYNC_CHECK();
  expect_no_errors(*e, "blocks freed by a neighbour in the same kernel", pass);

  record* earlier = table.take(grid * 128);
  partial_blocks<false><<<grid, 128>>>(earlier, 0);
  SYNC_CHECK();
  *e = errors{};
  free_while_others_allocate<<<grid, 128>>>(earlier, table.take(grid * 128), e);
  SYNC_CHECK();
  expect_no_errors(*e, "lanes freeing while the others allocate", pass);

  // Everything still live: requests served, aligned, disjoint, intact.
  std::vector<record> host(table.used);
  CHECK(cudaMemcpy(host.data(), table.device, table.used * sizeof(record), cudaMemcpyDeviceToHost));
  struct extent_of {
    unsigned long long address, bytes;
  };
  std::vector<extent_of> live;
  unsigned long long requests = 0, zero = 0;
  for (const record& r : host) {
    if (r.tag == 0) continue;
    ++requests;
    zero += r.size == 0;
    EXPECT(r.address != 0, "pass %d: a request of %u bytes got NULL", pass, r.size);
    EXPECT(r.address % 16 == 0, "pass %d: block %#llx (%u bytes) is not 16-byte aligned", pass, r.address, r.size);
    live.push_back({r.address, extent(r.size)});
  }
  std::sort(live.begin(), live.end(), [](const extent_of& a, const extent_of& b) { return a.address < b.address; });
  for (std::size_t i = 1; i < live.size(); ++i)
    EXPECT(live[i - 1].address + live[i - 1].bytes <= live[i].address,
           "pass %d: blocks %#llx (+%llu) and %#llx overlap%s", pass, live[i - 1].address, live[i - 1].bytes,
           live[i].address, live[i - 1].address == live[i].address ? " (the same pointer twice)" : "");
  *e = errors{};
  verify<<<256, 256>>>(table.device, table.used, e);
  SYNC_CHECK();
  expect_no_errors(*e, "live blocks", pass);
  unsigned long long stride = 7919;
  while (std::gcd(stride, table.used) != 1) ++stride;
  release_elsewhere<<<256, 256>>>(table.device, table.used, stride);
  SYNC_CHECK();
  std::printf("warps: pass %d: %llu live blocks (%llu of malloc(0)) disjoint and intact, freed by other threads\n", pass,
              requests, zero);
}

}  // namespace

int main() {
  records table;
  table.capacity = 1 << 18;
  CHECK(cudaMalloc(&table.device, table.capacity * sizeof(record)));
  errors* e;
  CHECK(cudaMallocManaged(&e, sizeof(errors)));
  for (int pass = 1; pass <= 2; ++pass) one_pass(pass, table, e);
  std::printf("warps: ok\n");
  return 0;
}
