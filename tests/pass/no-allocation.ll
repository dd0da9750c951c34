; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %s | FileCheck %s

; A device module that allocates nothing gets no runtime (only the marker).

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

; CHECK-NOT: __gpualloc
; CHECK-LABEL: define void @kernel(
define void @kernel(ptr %out) {
  store i32 1, ptr %out
  ret void
}
; CHECK-NOT: __gpualloc
; CHECK: !gpualloc.rewritten = !{}
