; A stand-in for the gpualloc runtime that never calls CUDA's malloc/free (a
; bump pointer over the heap), for tests that check no call to CUDA's
; allocator is left in user code once everything is inlined. The pass reads
; it instead of a strategy's runtime with -gpualloc-runtime-bc=<this file>
; (with --gpualloc-strategy=atomic, whose pin marker it carries).
target triple = "nvptx64-nvidia-cuda"

@__gpualloc_heap = weak addrspace(1) externally_initialized global ptr null
@__gpualloc_pin_atomic = weak addrspace(4) constant i32 1
@bump = internal addrspace(1) global i64 0

define ptr @__gpualloc_malloc(i64 %size) {
  %heap = load ptr, ptr addrspace(1) @__gpualloc_heap
  %offset = atomicrmw add ptr addrspace(1) @bump, i64 %size monotonic
  %p = getelementptr i8, ptr %heap, i64 %offset
  ret ptr %p
}

define ptr @__gpualloc_malloc_same_size(i64 %size) {
  %p = call ptr @__gpualloc_malloc(i64 %size)
  ret ptr %p
}

define void @__gpualloc_free(ptr %p) {
  ret void
}

define ptr @__gpualloc_malloc_aligned(i64 %size, i64 %align) {
  %padded = add i64 %size, %align
  %p = call ptr @__gpualloc_malloc(i64 %padded)
  ret ptr %p
}

define void @__gpualloc_free_aligned(ptr %p, i64 %align) {
  ret void
}
