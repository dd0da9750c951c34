; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes='default<O0>' -S %s | FileCheck %s --check-prefix=O0
; RUN: %opt -load-pass-plugin=%pass-plugin -passes='default<O2>' -S %s | FileCheck %s --check-prefix=O2

; The plugin adds the pass at the start of the default pipelines (what clang
; -fpass-plugin runs), at -O0 as well; at -O2 it runs before the inliner, so
; the runtime is inlined into the kernel: the kernel reads __gpualloc_heap
; itself.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare ptr @malloc(i64)
declare void @free(ptr)

; O0-LABEL: define ptx_kernel void @kernel(
; O0: call ptr @__gpualloc_malloc(i64 32)
; O0: call void @__gpualloc_free(
; O0: ret void
; O0: !gpualloc.rewritten

; O2-LABEL: define ptx_kernel void @kernel(
; O2: load ptr, ptr addrspacecast (ptr addrspace(1) @__gpualloc_heap to ptr)
; O2: ret void
; O2: !gpualloc.rewritten
define ptx_kernel void @kernel(ptr %out) #0 {
  %p = call ptr @malloc(i64 32)
  store ptr %p, ptr %out
  %q = load ptr, ptr %out
  call void @free(ptr %q)
  ret void
}

attributes #0 = { "target-cpu"="sm_90" "target-features"="+ptx86,+sm_90" }
