; REQUIRES: clang
; RUN: rm -rf %t && split-file %s %t
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-runtime-bc=%t/runtime.ll -gpualloc-strategy=atomic \
; RUN:   -passes=gpualloc-rewrite,gpualloc-finish -S %t/user.ll | FileCheck %s --check-prefix=PINNED
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-runtime-bc=%t/runtime.ll \
; RUN:   -passes=gpualloc-rewrite,gpualloc-finish -S %t/user.ll | FileCheck %s --check-prefix=UNPINNED
; RUN: not %opt -load-pass-plugin=%pass-plugin -gpualloc-strategy=no-such \
; RUN:   -passes=gpualloc-rewrite,gpualloc-finish -disable-output %t/user.ll 2>&1 | FileCheck %s --check-prefix=UNKNOWN
; RUN: not %opt -load-pass-plugin=%pass-plugin -gpualloc-runtime-bc=%t/runtime-without-pin.ll -gpualloc-strategy=atomic \
; RUN:   -passes=gpualloc-rewrite,gpualloc-finish -disable-output %t/user.ll 2>&1 | FileCheck %s --check-prefix=NO-PIN

; -gpualloc-strategy=NAME (gpualloc-clang++ --gpualloc-strategy=NAME) links
; NAME's runtime, whose pin marker __gpualloc_pin_NAME stays visible for
; libgpualloc: a module compiled for one strategy runs only under that
; strategy. Unpinned, nothing is linked and the entry points stay external.
; The runtime here is a stand-in.

; PINNED: @__gpualloc_pin_atomic = weak addrspace(4) constant i32 1
; PINNED-LABEL: define ptx_kernel void @kernel(
; PINNED-NOT: call
; PINNED: ret void
; UNPINNED-NOT: __gpualloc_pin
; UNPINNED: call ptr @__gpualloc_malloc_same_size(i64 16)
; UNPINNED: declare ptr @__gpualloc_malloc_same_size(i64)
; UNKNOWN: error: gpualloc: unknown strategy 'no-such' (valid: cuda, atomic
; NO-PIN: error: gpualloc: the runtime for 'atomic' lacks its pin marker __gpualloc_pin_atomic

;--- user.ll
target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare ptr @malloc(i64)

define ptx_kernel void @kernel(ptr %out) {
  %p = call ptr @malloc(i64 16)
  store ptr %p, ptr %out
  ret void
}

;--- runtime.ll
target triple = "nvptx64-nvidia-cuda"

@__gpualloc_heap = weak addrspace(1) externally_initialized global ptr null
@__gpualloc_pin_atomic = weak addrspace(4) constant i32 1

define ptr @__gpualloc_malloc_same_size(i64 %size) {
  %heap = load ptr, ptr addrspace(1) @__gpualloc_heap
  %p = getelementptr i8, ptr %heap, i64 %size
  ret ptr %p
}

;--- runtime-without-pin.ll
target triple = "nvptx64-nvidia-cuda"

@__gpualloc_heap = weak addrspace(1) externally_initialized global ptr null

define ptr @__gpualloc_malloc_same_size(i64 %size) {
  %heap = load ptr, ptr addrspace(1) @__gpualloc_heap
  ret ptr %heap
}
