; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %s -o %t.ll
; RUN: FileCheck %s < %t.ll
; RUN: %opt -S %s | diff - %t.ll

; The pass acts on NVPTX device modules only: a host module (here the host
; side of a CUDA compile) is left exactly as it was.

target triple = "x86_64-pc-linux-gnu"

declare ptr @malloc(i64)
declare void @free(ptr)
declare ptr @_Znwm(i64)

; CHECK-LABEL: define void @host(
define void @host(ptr %out) {
; CHECK-NEXT: call ptr @malloc(i64 16)
; CHECK-NEXT: call ptr @_Znwm(i64 4)
  %p = call ptr @malloc(i64 16)
  %q = call ptr @_Znwm(i64 4)
  store ptr %p, ptr %out
  store ptr %q, ptr %out
  call void @free(ptr %p)
  ret void
}
; CHECK-NOT: gpualloc
