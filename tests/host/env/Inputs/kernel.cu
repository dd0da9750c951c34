// A kernel that allocates, compiled by tests/host/env/CMakeLists.txt into
// an unpinned and a pinned cubin for the hooks test's `loads` scenario.
__global__ void kernel(void** out, unsigned long size) { out[threadIdx.x] = malloc(size); }
