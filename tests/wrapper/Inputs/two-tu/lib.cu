#ifdef RDC
__device__ int* make_value(int v) { return new int(v); }
#else
__global__ void other_kernel(int** out) { delete out[threadIdx.x]; }
#endif
