; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %s | FileCheck %s

; Every global operator new/delete form (Itanium mangling, size_t = unsigned
; long) becomes an entry point: allocations take the size (and alignment),
; deallocations the pointer (and alignment); sizes and nothrow tags are dropped.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare ptr @_Znwm(i64)
declare ptr @_Znam(i64)
declare ptr @_ZnwmRKSt9nothrow_t(i64, ptr)
declare ptr @_ZnamRKSt9nothrow_t(i64, ptr)
declare ptr @_Znwm12__hot_cold_t(i64, i8)
declare ptr @_Znam12__hot_cold_t(i64, i8)
declare ptr @_ZnwmRKSt9nothrow_t12__hot_cold_t(i64, ptr, i8)
declare ptr @_ZnamRKSt9nothrow_t12__hot_cold_t(i64, ptr, i8)
declare ptr @_ZnwmSt11align_val_t(i64, i64)
declare ptr @_ZnamSt11align_val_t(i64, i64)
declare ptr @_ZnwmSt11align_val_tRKSt9nothrow_t(i64, i64, ptr)
declare ptr @_ZnamSt11align_val_tRKSt9nothrow_t(i64, i64, ptr)
declare ptr @_ZnwmSt11align_val_t12__hot_cold_t(i64, i64, i8)
declare ptr @_ZnamSt11align_val_t12__hot_cold_t(i64, i64, i8)
declare ptr @_ZnwmSt11align_val_tRKSt9nothrow_t12__hot_cold_t(i64, i64, ptr, i8)
declare ptr @_ZnamSt11align_val_tRKSt9nothrow_t12__hot_cold_t(i64, i64, ptr, i8)
declare void @_ZdlPv(ptr)
declare void @_ZdaPv(ptr)
declare void @_ZdlPvm(ptr, i64)
declare void @_ZdaPvm(ptr, i64)
declare void @_ZdlPvRKSt9nothrow_t(ptr, ptr)
declare void @_ZdaPvRKSt9nothrow_t(ptr, ptr)
declare void @_ZdlPvSt11align_val_t(ptr, i64)
declare void @_ZdaPvSt11align_val_t(ptr, i64)
declare void @_ZdlPvmSt11align_val_t(ptr, i64, i64)
declare void @_ZdaPvmSt11align_val_t(ptr, i64, i64)
declare void @_ZdlPvSt11align_val_tRKSt9nothrow_t(ptr, i64, ptr)
declare void @_ZdaPvSt11align_val_tRKSt9nothrow_t(ptr, i64, ptr)

; CHECK-LABEL: define void @allocations(
define void @allocations(ptr %out, ptr %nt) {
; CHECK-NEXT: %new = call ptr @__gpualloc_malloc(i64 1)
; CHECK-NEXT: store ptr %new, ptr %out
  %new = call ptr @_Znwm(i64 1)
  store ptr %new, ptr %out
; CHECK-NEXT: %new.arr = call ptr @__gpualloc_malloc(i64 2)
  %new.arr = call ptr @_Znam(i64 2)
  store ptr %new.arr, ptr %out
; CHECK: %new.nt = call ptr @__gpualloc_malloc(i64 3)
  %new.nt = call ptr @_ZnwmRKSt9nothrow_t(i64 3, ptr %nt)
  store ptr %new.nt, ptr %out
; CHECK: %new.arr.nt = call ptr @__gpualloc_malloc(i64 4)
  %new.arr.nt = call ptr @_ZnamRKSt9nothrow_t(i64 4, ptr %nt)
  store ptr %new.arr.nt, ptr %out
; CHECK: %new.hc = call ptr @__gpualloc_malloc(i64 5)
  %new.hc = call ptr @_Znwm12__hot_cold_t(i64 5, i8 1)
  store ptr %new.hc, ptr %out
; CHECK: %new.arr.hc = call ptr @__gpualloc_malloc(i64 6)
  %new.arr.hc = call ptr @_Znam12__hot_cold_t(i64 6, i8 1)
  store ptr %new.arr.hc, ptr %out
; CHECK: %new.nt.hc = call ptr @__gpualloc_malloc(i64 7)
  %new.nt.hc = call ptr @_ZnwmRKSt9nothrow_t12__hot_cold_t(i64 7, ptr %nt, i8 1)
  store ptr %new.nt.hc, ptr %out
; CHECK: %new.arr.nt.hc = call ptr @__gpualloc_malloc(i64 8)
  %new.arr.nt.hc = call ptr @_ZnamRKSt9nothrow_t12__hot_cold_t(i64 8, ptr %nt, i8 1)
  store ptr %new.arr.nt.hc, ptr %out

; CHECK: %new.al = call ptr @__gpualloc_malloc_aligned(i64 64, i64 32)
  %new.al = call ptr @_ZnwmSt11align_val_t(i64 64, i64 32)
  store ptr %new.al, ptr %out
; CHECK: %new.arr.al = call ptr @__gpualloc_malloc_aligned(i64 65, i64 64)
  %new.arr.al = call ptr @_ZnamSt11align_val_t(i64 65, i64 64)
  store ptr %new.arr.al, ptr %out
; CHECK: %new.al.nt = call ptr @__gpualloc_malloc_aligned(i64 66, i64 128)
  %new.al.nt = call ptr @_ZnwmSt11align_val_tRKSt9nothrow_t(i64 66, i64 128, ptr %nt)
  store ptr %new.al.nt, ptr %out
; CHECK: %new.arr.al.nt = call ptr @__gpualloc_malloc_aligned(i64 67, i64 256)
  %new.arr.al.nt = call ptr @_ZnamSt11align_val_tRKSt9nothrow_t(i64 67, i64 256, ptr %nt)
  store ptr %new.arr.al.nt, ptr %out
; CHECK: %new.al.hc = call ptr @__gpualloc_malloc_aligned(i64 68, i64 512)
  %new.al.hc = call ptr @_ZnwmSt11align_val_t12__hot_cold_t(i64 68, i64 512, i8 1)
  store ptr %new.al.hc, ptr %out
; CHECK: %new.arr.al.hc = call ptr @__gpualloc_malloc_aligned(i64 69, i64 1024)
  %new.arr.al.hc = call ptr @_ZnamSt11align_val_t12__hot_cold_t(i64 69, i64 1024, i8 1)
  store ptr %new.arr.al.hc, ptr %out
; CHECK: %new.al.nt.hc = call ptr @__gpualloc_malloc_aligned(i64 70, i64 2048)
  %new.al.nt.hc = call ptr @_ZnwmSt11align_val_tRKSt9nothrow_t12__hot_cold_t(i64 70, i64 2048, ptr %nt, i8 1)
  store ptr %new.al.nt.hc, ptr %out
; CHECK: %new.arr.al.nt.hc = call ptr @__gpualloc_malloc_aligned(i64 71, i64 4096)
  %new.arr.al.nt.hc = call ptr @_ZnamSt11align_val_tRKSt9nothrow_t12__hot_cold_t(i64 71, i64 4096, ptr %nt, i8 1)
  store ptr %new.arr.al.nt.hc, ptr %out
; CHECK-NOT: call
; CHECK: ret void
  ret void
}

; CHECK-LABEL: define void @deallocations(
define void @deallocations(ptr %p, ptr %nt) {
; CHECK-NEXT: call void @__gpualloc_free(ptr %p)
; CHECK-NEXT: call void @__gpualloc_free(ptr %p)
; CHECK-NEXT: call void @__gpualloc_free(ptr %p)
; CHECK-NEXT: call void @__gpualloc_free(ptr %p)
; CHECK-NEXT: call void @__gpualloc_free(ptr %p)
; CHECK-NEXT: call void @__gpualloc_free(ptr %p)
  call void @_ZdlPv(ptr %p)
  call void @_ZdaPv(ptr %p)
  call void @_ZdlPvm(ptr %p, i64 16)
  call void @_ZdaPvm(ptr %p, i64 16)
  call void @_ZdlPvRKSt9nothrow_t(ptr %p, ptr %nt)
  call void @_ZdaPvRKSt9nothrow_t(ptr %p, ptr %nt)
; The alignment is passed on; a sized form's size is not.
; CHECK-NEXT: call void @__gpualloc_free_aligned(ptr %p, i64 32)
; CHECK-NEXT: call void @__gpualloc_free_aligned(ptr %p, i64 64)
; CHECK-NEXT: call void @__gpualloc_free_aligned(ptr %p, i64 128)
; CHECK-NEXT: call void @__gpualloc_free_aligned(ptr %p, i64 256)
; CHECK-NEXT: call void @__gpualloc_free_aligned(ptr %p, i64 512)
; CHECK-NEXT: call void @__gpualloc_free_aligned(ptr %p, i64 1024)
; CHECK-NEXT: ret void
  call void @_ZdlPvSt11align_val_t(ptr %p, i64 32)
  call void @_ZdaPvSt11align_val_t(ptr %p, i64 64)
  call void @_ZdlPvmSt11align_val_t(ptr %p, i64 16, i64 128)
  call void @_ZdaPvmSt11align_val_t(ptr %p, i64 16, i64 256)
  call void @_ZdlPvSt11align_val_tRKSt9nothrow_t(ptr %p, i64 512, ptr %nt)
  call void @_ZdaPvSt11align_val_tRKSt9nothrow_t(ptr %p, i64 1024, ptr %nt)
  ret void
}

; None of the replaced functions is left, not even as a declaration.
; CHECK-NOT: @_Znwm
; CHECK-NOT: @_Znam
; CHECK-NOT: @_ZdlPv
; CHECK-NOT: @_ZdaPv
