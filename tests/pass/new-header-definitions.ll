; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %s | FileCheck %s

; With <new> included, clang emits operator new/delete for the device as
; inline (linkonce_odr) functions calling CUDA's malloc/free (this is the IR
; of such a compile at -O0). Their callers now call the runtime, and the
; definitions, unused, are gone: no call to CUDA's malloc/free is left in
; user code.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

$_Znwm = comdat any
$_ZdlPv = comdat any

; CHECK-LABEL: define ptx_kernel void @kernel(
define ptx_kernel void @kernel(ptr %out) {
; CHECK: call ptr @__gpualloc_malloc(i64 4)
  %p = call noalias noundef nonnull ptr @_Znwm(i64 noundef 4)
  store ptr %p, ptr %out
; CHECK: call void @__gpualloc_free(
  call void @_ZdlPv(ptr noundef %p)
  ret void
}

define linkonce_odr noundef nonnull ptr @_Znwm(i64 noundef %size) comdat {
  %nonzero = icmp eq i64 %size, 0
  %n = select i1 %nonzero, i64 1, i64 %size
  %p = call noalias ptr @malloc(i64 noundef %n)
  ret ptr %p
}

define linkonce_odr void @_ZdlPv(ptr noundef %p) comdat {
  call void @free(ptr noundef %p)
  ret void
}

declare noalias ptr @malloc(i64 noundef)
declare void @free(ptr noundef)

; CHECK-NOT: @_Znwm
; CHECK-NOT: @_ZdlPv
; CHECK-NOT: comdat
