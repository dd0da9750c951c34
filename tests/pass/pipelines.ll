; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes='default<O0>' -S %s | FileCheck %s --check-prefix=O0
; RUN: %opt -load-pass-plugin=%pass-plugin -passes='default<O2>' -S %s | FileCheck %s --check-prefix=O2
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-strategy=atomic -passes='default<O2>' -S %s \
; RUN:   | FileCheck %s --check-prefix=PINNED

; The plugin adds gpualloc-rewrite at the start of the default pipelines
; (what clang -fpass-plugin runs), at -O0 as well, and gpualloc-finish at
; their end. Unpinned, the kernel calls the runtime's entry points, chosen per
; call site after inlining (a constant size: the same-size entry); pinned,
; the strategy's runtime is inlined: the kernel reads __gpualloc_heap itself.

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
; O2: call ptr @__gpualloc_malloc_same_size(i64 32)
; O2: call void @__gpualloc_free(
; O2: ret void
; O2-NOT: define {{.*}}@__gpualloc_malloc

; PINNED-LABEL: define ptx_kernel void @kernel(
; PINNED-NOT: call {{.*}}@__gpualloc
; PINNED: load ptr, ptr addrspacecast (ptr addrspace(1) @__gpualloc_heap to ptr)
; PINNED: ret void
; PINNED: !gpualloc.linked
define ptx_kernel void @kernel(ptr %out) #0 {
  %p = call ptr @malloc(i64 32)
  store ptr %p, ptr %out
  %q = load ptr, ptr %out
  call void @free(ptr %q)
  ret void
}

attributes #0 = { "target-cpu"="sm_90" "target-features"="+ptx86,+sm_90" }
