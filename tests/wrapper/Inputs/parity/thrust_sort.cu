// An unmodified program whose allocations come from a library: every thread
// sorts its own array with thrust::stable_sort(thrust::seq, ...), whose
// temporary buffers come from device malloc. The register-parity test
// compiles it for the run-time choice of strategy and folded to each one.
#include <thrust/execution_policy.h>
#include <thrust/sort.h>

__global__ void sort_rows(int* data, int row_length, int rows) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  int* begin = data + static_cast<long>(row) * row_length;
  thrust::stable_sort(thrust::seq, begin, begin + row_length);
}
