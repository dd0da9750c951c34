; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes='default<O2>' -S %s | FileCheck %s
; RUN: %opt -load-pass-plugin=%pass-plugin -passes='default<O0>' -S %s | FileCheck %s --check-prefix=O0
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-no-coalesce -passes='default<O2>' -S %s \
; RUN:   | FileCheck %s --check-prefix=LANE

; Each malloc call site gets its entry point after inlining, from LLVM's
; uniformity analysis: a size every lane of the warp shares (a constant, a
; kernel argument, arithmetic on them; also inside a divergent branch or a
; loop) gets the same-size entry; a size that depends on the thread, or that
; a device function receives from unknown callers, keeps the general entry.
; At -O0 every call keeps the general entry; -gpualloc-no-coalesce gives every
; call the per-lane entries.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare ptr @malloc(i64)
declare void @free(ptr)
declare noundef i32 @llvm.nvvm.read.ptx.sreg.tid.x()

; CHECK-LABEL: define ptx_kernel void @constant_size(
; CHECK: call ptr @__gpualloc_malloc_same_size(i64 48)
; CHECK: call void @__gpualloc_free(
; O0-LABEL: define ptx_kernel void @constant_size(
; O0: call ptr @__gpualloc_malloc(i64 48)
; LANE-LABEL: define ptx_kernel void @constant_size(
; LANE: call ptr @__gpualloc_malloc_lane(i64 48)
; LANE: call void @__gpualloc_free_lane(
define ptx_kernel void @constant_size(ptr %out) {
  %p = call ptr @malloc(i64 48)
  store ptr %p, ptr %out
  %q = load ptr, ptr %out
  call void @free(ptr %q)
  ret void
}

; CHECK-LABEL: define ptx_kernel void @kernel_argument(
; CHECK: call ptr @__gpualloc_malloc_same_size(i64 %
define ptx_kernel void @kernel_argument(ptr %out, i64 %n) {
  %size = shl i64 %n, 1
  %p = call ptr @malloc(i64 %size)
  store ptr %p, ptr %out
  ret void
}

; CHECK-LABEL: define ptx_kernel void @per_thread(
; CHECK: call ptr @__gpualloc_malloc(i64 %
define ptx_kernel void @per_thread(ptr %out) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %wide = zext i32 %tid to i64
  %size = add i64 %wide, 16
  %p = call ptr @malloc(i64 %size)
  store ptr %p, ptr %out
  ret void
}

; A uniform size in a branch only some lanes take.
; CHECK-LABEL: define ptx_kernel void @divergent_branch(
; CHECK: call ptr @__gpualloc_malloc_same_size(i64 %n)
define ptx_kernel void @divergent_branch(ptr %out, i64 %n) {
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %odd = and i32 %tid, 1
  %take = icmp eq i32 %odd, 0
  br i1 %take, label %alloc, label %done
alloc:
  %p = call ptr @malloc(i64 %n)
  store ptr %p, ptr %out
  br label %done
done:
  ret void
}

; In a loop whose trip count depends on the thread: a size from the kernel
; argument stays uniform, the induction variable does not.
; CHECK-LABEL: define ptx_kernel void @loop(
; CHECK: call ptr @__gpualloc_malloc_same_size(i64 %n)
; CHECK: call ptr @__gpualloc_malloc(i64 %
define ptx_kernel void @loop(ptr %out, i64 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %trips = zext i32 %tid to i64
  br label %body
body:
  %i = phi i64 [ 0, %entry ], [ %next, %body ]
  %p = call ptr @malloc(i64 %n)
  store volatile ptr %p, ptr %out
  %grow = add i64 %i, 16
  %r = call ptr @malloc(i64 %grow)
  store volatile ptr %r, ptr %out
  %next = add i64 %i, 1
  %again = icmp ult i64 %next, %trips
  br i1 %again, label %body, label %done
done:
  ret void
}

; A device function does not know its callers: its parameter is divergent.
; CHECK-LABEL: define void @device_function(
; CHECK: call ptr @__gpualloc_malloc(i64 %n)
define void @device_function(ptr %out, i64 %n) noinline {
  %p = call ptr @malloc(i64 %n)
  store ptr %p, ptr %out
  ret void
}
