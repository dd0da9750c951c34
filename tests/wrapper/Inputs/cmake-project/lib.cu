__device__ int* make_value(int v) { return new int(v); }
