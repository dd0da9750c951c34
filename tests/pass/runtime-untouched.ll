; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite,gpualloc-finish -S %runtime-dir/cuda.bc | FileCheck %s
; RUN: %opt -S %runtime-dir/cuda.bc | FileCheck %s

; The runtime's own module (it defines the entry points) is left alone: its
; `cuda` strategy calls CUDA's malloc and free, and rewriting those calls
; would make __gpualloc_malloc call itself (a GPU hang).

; CHECK: define {{.*}}ptr @__gpualloc_malloc(i64
; CHECK: call {{.*}}ptr @malloc(i64
; CHECK-NOT: gpualloc.rewritten
