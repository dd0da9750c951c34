; REQUIRES: clang
; RUN: rm -rf %t && split-file %s %t
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-runtime-bc=%t/runtime.ll -passes=gpualloc-rewrite -S %t/user.ll \
; RUN:   | FileCheck %s --check-prefix=UNPINNED
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-runtime-bc=%t/runtime.ll -gpualloc-strategy=atomic \
; RUN:   -passes=gpualloc-rewrite -S %t/user.ll | FileCheck %s --check-prefix=PINNED
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-runtime-bc=%t/runtime.ll -gpualloc-strategy=atomic \
; RUN:   -passes='default<O2>' -S %t/user.ll | FileCheck %s --check-prefix=FOLDED
; RUN: not %opt -load-pass-plugin=%pass-plugin -gpualloc-runtime-bc=%t/runtime.ll -gpualloc-strategy=no-such \
; RUN:   -passes=gpualloc-rewrite -disable-output %t/user.ll 2>&1 | FileCheck %s --check-prefix=UNKNOWN
; RUN: not %opt -load-pass-plugin=%pass-plugin -gpualloc-runtime-bc=%t/runtime-without-pin.ll -gpualloc-strategy=atomic \
; RUN:   -passes=gpualloc-rewrite -disable-output %t/user.ll 2>&1 | FileCheck %s --check-prefix=NO-HOOK

; -gpualloc-strategy=NAME (gpualloc-clang++ --gpualloc-strategy=NAME) pins the
; strategy: the runtime's __gpualloc_pinned_strategy becomes a constant
; holding NAME's registry id, so after inlining the optimizer folds the
; strategy dispatch. Unpinned, it keeps the runtime's "none" and is constant
; as well. It stays visible (weak_odr) for libgpualloc to read. The runtime
; here is a stand-in that adds the pin to every allocation's offset.

; UNPINNED: @__gpualloc_pinned_strategy = weak_odr addrspace(1) constant i32 -1
; PINNED: @__gpualloc_pinned_strategy = weak_odr addrspace(1) constant i32 [[ID:[0-9]+]]
; FOLDED-LABEL: define ptx_kernel void @kernel(
; FOLDED-NOT: load i32, ptr addrspace(1) @__gpualloc_pinned_strategy
; FOLDED: ret void
; UNKNOWN: error: gpualloc: unknown strategy 'no-such' (valid: cuda, atomic
; NO-HOOK: error: gpualloc: cannot pin strategy 'atomic': this runtime has no __gpualloc_pinned_strategy

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
@__gpualloc_pinned_strategy = weak addrspace(1) global i32 -1

define ptr @__gpualloc_malloc(i64 %size) {
  %heap = load ptr, ptr addrspace(1) @__gpualloc_heap
  %pin = load i32, ptr addrspace(1) @__gpualloc_pinned_strategy
  %pin.ext = zext i32 %pin to i64
  %p = getelementptr i8, ptr %heap, i64 %pin.ext
  ret ptr %p
}

;--- runtime-without-pin.ll
target triple = "nvptx64-nvidia-cuda"

@__gpualloc_heap = weak addrspace(1) externally_initialized global ptr null

define ptr @__gpualloc_malloc(i64 %size) {
  %heap = load ptr, ptr addrspace(1) @__gpualloc_heap
  ret ptr %heap
}
