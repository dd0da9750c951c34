; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-strategy=cmalloc -passes=gpualloc-rewrite,gpualloc-finish -S %s -o %t.ll
; RUN: FileCheck %s < %t.ll
; RUN: FileCheck %s --check-prefix=RETARGETED < %t.ll
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-strategy=cuda -passes=gpualloc-rewrite,gpualloc-finish -S %s \
; RUN:   | FileCheck %s --check-prefix=CUDA

; With a pinned strategy (gpualloc-clang++ --gpualloc-strategy=NAME), that
; strategy's runtime (built into the plugin) is linked into the module and
; inlined:
;  - only the heap, the ABI version and the pin marker stay visible outside
;    the module, weak (several -fgpu-rdc translation units share them);
;  - everything else from the runtime is internal, inlined where it can be;
;    what stays a call compiles for the user's GPU (the runtime is built for
;    the oldest one) and is marked as runtime code;
;  - the `cuda` strategy's call to CUDA's own malloc survives;
;  - the module's flags win: the runtime's (nvvm-reflect-ftz = 0 among them)
;    are dropped instead of conflicting.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

; CHECK-DAG: @__gpualloc_heap = weak {{.*}}addrspace(1) {{.*}}global ptr null
; CHECK-DAG: @__gpualloc_abi = weak {{.*}}constant i32 6
; CHECK-DAG: @__gpualloc_pin_cmalloc = weak {{.*}}constant i32 3

declare ptr @malloc(i64)
declare void @free(ptr)

; CHECK-LABEL: define ptx_kernel void @kernel(
define ptx_kernel void @kernel(ptr %out) #0 {
; CHECK-NOT: call {{.*}}@__gpualloc_malloc
; CHECK-NOT: call {{.*}}@malloc
; CHECK: ret void
  %p = call ptr @malloc(i64 32)
  store ptr %p, ptr %out
  %q = load ptr, ptr %out
  call void @free(ptr %q)
  ret void
}

; CHECK: define internal {{.*}}@{{.*}}circular{{.*}}walk{{.*}} #[[RT:[0-9]+]]
; CHECK-NOT: define {{(dso_local )?}}{{(weak|linkonce)}}
; CHECK: attributes #[[RT]] = { {{.*}}"gpualloc-runtime"{{.*}}"target-cpu"="sm_90" "target-features"="+ptx86,+sm_90" }
; No trace of the runtime's own GPU (sm_75) is left.
; RETARGETED-NOT: sm_75
attributes #0 = { "target-cpu"="sm_90" "target-features"="+ptx86,+sm_90" }

; CUDA-LABEL: define ptx_kernel void @kernel(
; CUDA: call {{.*}}ptr @malloc(i64
; CUDA: call void @free(

; CHECK: !llvm.module.flags = !{[[FTZ:![0-9]+]]}
; CHECK: [[FTZ]] = !{i32 4, !"nvvm-reflect-ftz", i32 1}
!llvm.module.flags = !{!0}
!0 = !{i32 4, !"nvvm-reflect-ftz", i32 1}
