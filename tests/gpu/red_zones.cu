// Checked mode's red zones: writes past either end of a block are reported
// when it is freed or by the sweep after the kernel, whichever comes first,
// with the block's size, the offsets written and the kernels and threads
// that allocated and freed it; frees of pointers into a block are
// refused; each counted once, nothing else counted (a program without bugs
// adds nothing), and the heap keeps working. Under every strategy (the
// counts), and the reports' text under one.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M %for-each-strategy -- %gpu-bin/red_zones
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M GPUALLOC_STRATEGY=sm-slab %gpu-bin/red_zones 2>&1 | FileCheck %s
// CHECK-DAG: gpualloc: heap-buffer-overflow of the 15-byte block at 0x{{[0-9a-f]+}}: bytes 15 .. 15 written (allocated by kernel _Z9misbehavePPc block (1,0,0) thread (3,0,0)); found by the free in kernel _Z9misbehavePPc block (1,0,0) thread (3,0,0)
// CHECK-DAG: gpualloc: heap-buffer-overflow of the 16-byte block at 0x{{[0-9a-f]+}}: bytes 16 .. 23 written (allocated by kernel _Z9misbehavePPc block (1,0,0) thread (4,0,0)); found by the sweep after kernel _Z9misbehavePPc
// CHECK-DAG: gpualloc: heap-buffer-underflow of the 32-byte block at 0x{{[0-9a-f]+}}: bytes -1 .. -1 written (allocated by kernel _Z9misbehavePPc block (1,0,0) thread (5,0,0)); found by the free in kernel _Z9misbehavePPc block (1,0,0) thread (5,0,0)
// CHECK-DAG: gpualloc: free of a pointer this heap never handed out of 0x{{[0-9a-f]+}} by block (1,0,0) thread (6,0,0)
// CHECK-DAG: gpualloc: checked mode: kernel _Z9misbehavePPc made 4 heap error(s)
// CHECK-NOT: free_handed_on
// CHECK: red_zones: ok
#include <cstdio>

#include "Inputs/check.h"
#include "Inputs/counters.h"

// Block 1's threads 3-6 misbehave; thread 4's block is freed by a kernel of
// its own, after the sweep after this one found its damage.
__global__ void misbehave(char** handed_on) {
  if (blockIdx.x != 1) return;
  if (threadIdx.x == 3) {  // one byte past a 15-byte block (its slack)
    char* p = static_cast<char*>(malloc(15));
    p[15] = 1;
    free(p);
  } else if (threadIdx.x == 4) {  // eight bytes past a 16-byte block, freed later elsewhere
    char* p = static_cast<char*>(malloc(16));
    for (int i = 16; i < 24; ++i) p[i] = 2;
    *handed_on = p;
  } else if (threadIdx.x == 5) {  // one byte before a 32-byte block
    char* p = static_cast<char*>(malloc(32));
    p[-1] = 3;
    free(p);
  } else if (threadIdx.x == 6) {  // a pointer into a block: refused, the block freed as it should be
    char* p = static_cast<char*>(malloc(64));
    free(p + 16);
    free(p);
  }
}

__global__ void free_handed_on(char** handed_on) {
  if (blockIdx.x == 0 && threadIdx.x == 7) free(*handed_on);
}

// Every thread writes its whole block and frees it: nothing to report.
__global__ void behave(unsigned* failed) {
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned size = 1 + tid % 200;
  auto* p = static_cast<unsigned char*>(malloc(size));
  if (p == nullptr) {
    atomicAdd(failed, 1u);
    return;
  }
  for (unsigned i = 0; i < size; ++i) p[i] = static_cast<unsigned char>(tid);
  free(p);
}

int main() {
  char** handed_on;
  unsigned* failed;
  CHECK(cudaMallocManaged(&handed_on, sizeof(char*)));
  CHECK(cudaMallocManaged(&failed, sizeof(unsigned)));
  *failed = 0;
  misbehave<<<2, 32>>>(handed_on);
  SYNC_CHECK();
  free_handed_on<<<1, 32>>>(handed_on);
  SYNC_CHECK();
  counters c = read_counters();
  EXPECT(c.overflows == 3, "%llu overflows counted, 3 made", c.overflows);
  EXPECT(c.foreign_frees == 1 && c.double_frees == 0, "bad frees: %llu foreign, %llu double; 1 and 0 made",
         c.foreign_frees, c.double_frees);
  EXPECT(c.mallocs == 4 && c.frees == 4, "mallocs %llu, frees %llu: every block freed once", c.mallocs, c.frees);

  behave<<<256, 128>>>(failed);
  SYNC_CHECK();
  c = read_counters();
  EXPECT(*failed == 0, "%u allocations failed", *failed);
  EXPECT(c.overflows == 3 && c.foreign_frees == 1 && c.double_frees == 0, "a program without bugs was reported");
  EXPECT(c.mallocs == c.frees, "mallocs %llu, frees %llu", c.mallocs, c.frees);
  std::printf("red_zones: ok\n");
  return 0;
}
