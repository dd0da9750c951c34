// Checked mode's read check (compiled with --gpualloc-check-reads): a read
// of a freed block, in the kernel that freed it or a later one, is reported
// as heap-use-after-free with the bytes read and the kernels and threads
// that allocated, freed and read it; a read one byte past a block or one
// byte before it as heap-buffer-overflow or -underflow. Each counted once,
// under every strategy (`cuda` too: its blocks lie in CUDA's heap). Blocks
// that hold the poison and zone bytes as their own data, read by thousands
// of threads while others free, add nothing; unchecked, nothing is reported.
//
// REQUIRES: cuda-gpu
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M %for-each-strategy -- %gpu-bin/read_checks
// RUN: env GPUALLOC_CHECK=1 GPUALLOC_HEAP_SIZE=256M GPUALLOC_STRATEGY=sm-slab %gpu-bin/read_checks 2>&1 | FileCheck %s
// RUN: env GPUALLOC_CHECK=0 GPUALLOC_STRATEGY=sm-slab %gpu-bin/read_checks 2>&1 | FileCheck %s --check-prefix=UNCHECKED
// CHECK-DAG: gpualloc: heap-use-after-free of the 64-byte block at 0x{{[0-9a-f]+}}: bytes 12 .. 15 read after its free (allocated by kernel _Z15read_after_freePj block (0,0,0) thread (2,0,0); freed by kernel _Z15read_after_freePj block (0,0,0) thread (2,0,0)); read by kernel _Z15read_after_freePj block (0,0,0) thread (2,0,0)
// CHECK-DAG: gpualloc: heap-use-after-free of the 100-byte block at 0x{{[0-9a-f]+}}: bytes 96 .. 99 read after its free (allocated by kernel _Z8allocatePPi block (0,0,0) thread (3,0,0); freed by kernel _Z7releasePPi block (0,0,0) thread (4,0,0)); read by kernel _Z9read_latePPiPj block (0,0,0) thread (0,0,0)
// CHECK-DAG: gpualloc: heap-buffer-overflow of the 20-byte block at 0x{{[0-9a-f]+}}: bytes 20 .. 20 read (allocated by kernel _Z9read_pastPh block (1,0,0) thread (5,0,0)); read by kernel _Z9read_pastPh block (1,0,0) thread (5,0,0)
// CHECK-DAG: gpualloc: heap-buffer-underflow of the 32-byte block at 0x{{[0-9a-f]+}}: bytes -1 .. -1 read (allocated by kernel _Z9read_pastPh block (1,0,0) thread (6,0,0)); read by kernel _Z9read_pastPh block (1,0,0) thread (6,0,0)
// CHECK-DAG: gpualloc: checked mode: kernel _Z15read_after_freePj made 1 heap error(s)
// CHECK-DAG: gpualloc: checked mode: kernel _Z9read_latePPiPj made 1 heap error(s)
// CHECK-DAG: gpualloc: checked mode: kernel _Z9read_pastPh made 2 heap error(s)
// CHECK-NOT: _Z11clean_readsPj made
// CHECK: read_checks: ok
// UNCHECKED-NOT: gpualloc: heap-
// UNCHECKED: read_checks: ok
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "Inputs/check.h"
#include "Inputs/counters.h"

// Thread 2 reads a word of a block it freed.
__global__ void read_after_free(unsigned* read_back) {
  if (threadIdx.x != 2) return;
  auto* p = static_cast<unsigned*>(malloc(64));
  p[3] = 7;
  free(p);
  *read_back = static_cast<volatile unsigned*>(p)[3];
}

// A block allocated, freed and read by three kernels.
__global__ void allocate(int** handed) {
  if (threadIdx.x == 3) *handed = static_cast<int*>(malloc(100));
}
__global__ void release(int** handed) {
  if (threadIdx.x == 4) free(*handed);
}
__global__ void read_late(int** handed, unsigned* read_back) {
  if (threadIdx.x == 0) *read_back = static_cast<volatile int*>(*handed)[24];
}

// Block 1's thread 5 reads one byte past its block, thread 6 one byte before.
__global__ void read_past(unsigned char* read_back) {
  if (blockIdx.x != 1) return;
  if (threadIdx.x == 5) {
    auto* p = static_cast<unsigned char*>(malloc(20));
    read_back[0] = static_cast<volatile unsigned char*>(p)[20];
    free(p);
  } else if (threadIdx.x == 6) {
    auto* p = static_cast<unsigned char*>(malloc(32));
    read_back[1] = static_cast<volatile unsigned char*>(p)[-1];
    free(p);
  }
}

// Every thread fills a block with checked mode's patterns as its own data,
// reads each byte back and frees it, rounds over: every read takes the
// check's slow path, beside blocks being freed and handed out again.
__global__ void clean_reads(unsigned* wrong) {
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  for (unsigned round = 0; round < 3; ++round) {
    const unsigned size = 1 + (tid * 13 + round * 7) % 200;
    auto* p = static_cast<unsigned char*>(malloc(size));
    if (p == nullptr) {
      atomicAdd(wrong, 1u);
      continue;
    }
    const unsigned char pattern = (tid + round) % 2 ? 0xfd : 0xc5;
    memset(p, pattern, size);
    unsigned bad = 0;
    for (unsigned i = 0; i < size; ++i) bad += static_cast<volatile unsigned char*>(p)[i] != pattern;
    if (bad != 0) atomicAdd(wrong, 1u);
    free(p);
  }
}

int main() {
  const char* check = std::getenv("GPUALLOC_CHECK");
  const bool checked = check != nullptr && std::strcmp(check, "1") == 0;
  unsigned* read_back;
  unsigned* wrong;
  unsigned char* bytes_back;
  int** handed;
  CHECK(cudaMallocManaged(&read_back, 2 * sizeof(unsigned)));
  CHECK(cudaMallocManaged(&wrong, sizeof(unsigned)));
  CHECK(cudaMallocManaged(&bytes_back, 2));
  CHECK(cudaMallocManaged(&handed, sizeof(int*)));
  *wrong = 0;

  read_after_free<<<1, 32>>>(read_back);
  SYNC_CHECK();
  allocate<<<1, 32>>>(handed);
  SYNC_CHECK();
  release<<<1, 32>>>(handed);
  SYNC_CHECK();
  read_late<<<1, 32>>>(handed, read_back + 1);
  SYNC_CHECK();
  read_past<<<2, 32>>>(bytes_back);
  SYNC_CHECK();
  if (checked) {
    EXPECT(read_back[0] == 0xfdfdfdfdu && read_back[1] == 0xfdfdfdfdu, "reads after free saw 0x%x and 0x%x, not the poison",
           read_back[0], read_back[1]);
    EXPECT(bytes_back[0] == 0xc5 && bytes_back[1] == 0xc5, "reads past a block saw 0x%x and 0x%x, not its red zones",
           bytes_back[0], bytes_back[1]);
  }
  const counters bugs = read_counters();
  const unsigned long long expected = checked ? 2 : 0;
  EXPECT(bugs.use_after_frees == expected && bugs.overflows == expected,
         "%llu uses after free and %llu overflows counted, %llu of each made", bugs.use_after_frees, bugs.overflows,
         expected);

  clean_reads<<<64, 128>>>(wrong);
  SYNC_CHECK();
  const counters after = read_counters();
  EXPECT(*wrong == 0, "%u blocks failed or read back wrong", *wrong);
  EXPECT(after.use_after_frees == bugs.use_after_frees && after.overflows == bugs.overflows &&
             after.double_frees + after.foreign_frees == 0,
         "a program without bugs was reported: %llu uses after free, %llu overflows, %llu double, %llu foreign",
         after.use_after_frees - bugs.use_after_frees, after.overflows - bugs.overflows, after.double_frees,
         after.foreign_frees);
  EXPECT(after.mallocs == after.frees, "mallocs %llu, frees %llu", after.mallocs, after.frees);
  std::printf("read_checks: ok\n");
  return 0;
}
