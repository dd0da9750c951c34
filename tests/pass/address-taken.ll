; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %s | FileCheck %s

; A use of malloc or operator new that is not a direct call (a function
; pointer stored in memory or in a global's initialiser, a call through a
; mismatched type) refers to gpualloc too: to the entry point itself where
; the signatures agree, else to an internal thunk with the original signature.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

; CHECK: @allocators = addrspace(1) global [3 x ptr] [ptr @__gpualloc_malloc, ptr @__gpualloc_free, ptr @__gpualloc_thunk._ZnwmRKSt9nothrow_t]
@allocators = addrspace(1) global [3 x ptr] [ptr @malloc, ptr @free, ptr @_ZnwmRKSt9nothrow_t]

declare ptr @malloc(i64)
declare void @free(ptr)
declare ptr @_ZnwmRKSt9nothrow_t(i64, ptr)
declare ptr @_ZnwmSt11align_val_t(i64, i64)
declare ptr @_ZnamSt11align_val_tRKSt9nothrow_t(i64, i64, ptr)

; CHECK-LABEL: define void @user(
define void @user(ptr %slot, ptr %nt) {
; CHECK-NEXT: store ptr @__gpualloc_malloc, ptr %slot
  store ptr @malloc, ptr %slot
; CHECK-NEXT: store ptr @__gpualloc_malloc_aligned, ptr %slot
  store ptr @_ZnwmSt11align_val_t, ptr %slot
; CHECK-NEXT: store ptr @__gpualloc_thunk._ZnamSt11align_val_tRKSt9nothrow_t, ptr %slot
  store ptr @_ZnamSt11align_val_tRKSt9nothrow_t, ptr %slot
; A call whose type does not match the declaration goes through the thunk.
; CHECK-NEXT: %p = call ptr @__gpualloc_thunk._ZnwmRKSt9nothrow_t(i64 16)
  %p = call ptr @_ZnwmRKSt9nothrow_t(i64 16)
; CHECK-NEXT: ret void
  ret void
}

; CHECK-LABEL: define internal ptr @__gpualloc_thunk._ZnwmRKSt9nothrow_t(i64 %0, ptr %1)
; CHECK-NEXT: entry:
; CHECK-NEXT: %2 = call ptr @__gpualloc_malloc(i64 %0)
; CHECK-NEXT: ret ptr %2

; CHECK-LABEL: define internal ptr @__gpualloc_thunk._ZnamSt11align_val_tRKSt9nothrow_t(i64 %0, i64 %1, ptr %2)
; CHECK-NEXT: entry:
; CHECK-NEXT: %3 = call ptr @__gpualloc_malloc_aligned(i64 %0, i64 %1)
; CHECK-NEXT: ret ptr %3

; No operator new is left (the runtime, linked in, keeps its own calls to malloc).
; CHECK-NOT: @_Zn
