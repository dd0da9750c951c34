// A plain CUDA program with device-side dynamic memory, nothing gpualloc-
// specific in it: every thread collects the divisors of its number into an
// array that it grows with new[]/delete[]; a second kernel checks each list
// against the divisor sum and frees it. Build it with gpualloc-clang++ and
// pick the allocator at run time:
//
//   gpualloc-clang++ -O2 divisors.cu -o divisors
//   GPUALLOC_STRATEGY=atomic GPUALLOC_STATS=1 ./divisors
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                                       \
  do {                                                                                                    \
    cudaError_t e = (call);                                                                               \
    if (e != cudaSuccess) {                                                                               \
      std::fprintf(stderr, "divisors: %s failed: %s\n", #call, cudaGetErrorString(e));                    \
      std::exit(1);                                                                                       \
    }                                                                                                     \
  } while (0)

struct divisor_list {
  unsigned* items;
  unsigned count;
};

__global__ void collect(divisor_list* lists, unsigned n, unsigned* failures) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  unsigned number = t + 1, capacity = 4, count = 0;
  unsigned* items = new unsigned[capacity];
  for (unsigned d = 1; items != nullptr && d * d <= number; ++d) {
    if (number % d != 0) continue;
    for (unsigned divisor : {d, number / d}) {
      if (count > 0 && divisor == items[count - 1]) continue;  // d == number / d
      if (count == capacity) {                                 // grow: allocate, copy, release
        unsigned* bigger = new unsigned[capacity * 2];
        if (bigger != nullptr)
          for (unsigned i = 0; i < count; ++i) bigger[i] = items[i];
        delete[] items;
        items = bigger;
        capacity *= 2;
        if (items == nullptr) break;
      }
      items[count++] = divisor;
    }
  }
  if (items == nullptr) atomicAdd(failures, 1u);
  lists[t] = {items, items ? count : 0};
}

__global__ void check_and_release(divisor_list* lists, unsigned n, unsigned long long* checksum) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  unsigned long long sum = 0;
  for (unsigned i = 0; i < lists[t].count; ++i) sum += lists[t].items[i];
  delete[] lists[t].items;
  atomicAdd(checksum, sum);
}

int main(int argc, char** argv) {
  const unsigned n = argc > 1 ? std::atoi(argv[1]) : 1u << 18, block = 256, repetitions = 5;
  divisor_list* lists;
  unsigned* failures;
  unsigned long long* checksum;
  CHECK(cudaMalloc(&lists, n * sizeof(divisor_list)));
  CHECK(cudaMallocManaged(&failures, sizeof(unsigned)));
  CHECK(cudaMallocManaged(&checksum, sizeof(unsigned long long)));

  // The sum of divisors of 1..n, computed on the host.
  unsigned long long expected = 0;
  for (unsigned long long d = 1; d <= n; ++d) expected += d * (n / d);

  cudaEvent_t start, middle, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&middle));
  CHECK(cudaEventCreate(&stop));
  std::vector<float> collect_ms, release_ms;
  for (unsigned r = 0; r < repetitions + 1; ++r) {  // the first run warms up
    *failures = 0;
    *checksum = 0;
    CHECK(cudaEventRecord(start));
    collect<<<(n + block - 1) / block, block>>>(lists, n, failures);
    CHECK(cudaEventRecord(middle));
    check_and_release<<<(n + block - 1) / block, block>>>(lists, n, checksum);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaGetLastError());
    CHECK(cudaEventSynchronize(stop));
    if (*failures != 0 || *checksum != expected) {
      std::fprintf(stderr, "divisors: wrong result (%u allocations failed, checksum %llu, expected %llu)\n", *failures,
                   *checksum, expected);
      return 1;
    }
    float a, b;
    CHECK(cudaEventElapsedTime(&a, start, middle));
    CHECK(cudaEventElapsedTime(&b, middle, stop));
    if (r > 0) collect_ms.push_back(a), release_ms.push_back(b);
  }
  std::sort(collect_ms.begin(), collect_ms.end());
  std::sort(release_ms.begin(), release_ms.end());
  const char* strategy = std::getenv("GPUALLOC_STRATEGY");
  std::printf("divisors: %u threads, strategy %s: allocating kernel %.3f ms, freeing kernel %.3f ms (medians of %u), checksum ok\n",
              n, strategy ? strategy : "(default)", collect_ms[repetitions / 2], release_ms[repetitions / 2], repetitions);
  return 0;
}
