// Blocks still allocated when the program exits: counted with statistics or
// checked mode, and in checked mode the largest listed with the kernel and
// thread that allocated them (`cuda`'s blocks live in CUDA's heap and are
// counted only). A program that frees everything gets no report. Under every
// strategy the program must run clean; the report's text is checked under one.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M %for-each-strategy -- %gpu-bin/leaks
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M GPUALLOC_STRATEGY=sm-slab %gpu-bin/leaks 2>&1 | FileCheck %s
// RUN: env GPUALLOC_STATS=1 GPUALLOC_HEAP_SIZE=256M GPUALLOC_STRATEGY=sm-slab %gpu-bin/leaks 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M GPUALLOC_STRATEGY=sm-slab %gpu-bin/leaks --no-leak 2>&1 | FileCheck %s --check-prefix=NONE
// CHECK: leaks: ok
// CHECK: gpualloc: 32 block(s) still allocated in context {{[0-9]+}} when the program exits
// CHECK-NEXT: gpualloc: checked mode: the 5 largest of them ({{.*}} in all):
// CHECK-NEXT: gpualloc:   70000 bytes at 0x{{[0-9a-f]+}}, allocated by kernel _Z4leakb block (0,0,0) thread (2,0,0)
// CHECK-NEXT: gpualloc:   5000 bytes at 0x{{[0-9a-f]+}}, allocated by kernel _Z4leakb block (0,0,0) thread (3,0,0)
// CHECK-NEXT: gpualloc:   100 bytes at 0x{{[0-9a-f]+}}, allocated by kernel _Z4leakb block (0,0,0) thread (5,0,0)
// CHECK-NEXT: gpualloc:   16 bytes at 0x{{[0-9a-f]+}}, allocated by kernel _Z4leakb block (0,0,0) thread
// CHECK-NEXT: gpualloc:   16 bytes at 0x{{[0-9a-f]+}}, allocated by kernel _Z4leakb block (0,0,0) thread
// STATS: gpualloc: 32 block(s) of {{.*}} still allocated in context {{[0-9]+}} when the program exits
// STATS-NOT: largest
// NONE: leaks: ok
// NONE-NOT: still allocated
#include <cstdio>
#include <cstring>

#include "Inputs/check.h"

// Threads 0-31 keep their blocks (70,000, 5,000, 100 and 16 bytes), 32-63 free theirs.
__global__ void leak(bool free_all) {
  const unsigned t = threadIdx.x;
  const unsigned size = t == 2 ? 70000 : t == 3 ? 5000 : t == 5 ? 100 : 16;
  char* p = static_cast<char*>(malloc(size));
  if (p == nullptr) return;
  p[0] = 1;
  if (t >= 32 || free_all) free(p);
}

int main(int argc, char** argv) {
  const bool free_all = argc > 1 && std::strcmp(argv[1], "--no-leak") == 0;
  leak<<<1, 64>>>(free_all);
  SYNC_CHECK();
  std::printf("leaks: ok\n");
  std::fflush(stdout);
  return 0;
}
