; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %s -o %t.ll
; RUN: FileCheck %s < %t.ll
; RUN: FileCheck %s --check-prefix=RETARGETED < %t.ll

; After rewriting, the runtime (built into the plugin) is linked into the
; module:
;  - only __gpualloc_heap stays visible outside the module, weak (several
;    -fgpu-rdc translation units share it) and in the global address space;
;  - everything else from the runtime is internal, so it inlines and does not
;    clash with the copy in another translation unit;
;  - runtime functions compile for the user's GPU (the runtime is built for
;    the oldest one) and are marked as runtime code;
;  - the runtime's own call to CUDA's malloc (its `cuda` strategy) survives;
;  - the module's flags win: the runtime's (nvvm-reflect-ftz = 0 among them)
;    are dropped instead of conflicting.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

; CHECK: @__gpualloc_heap = weak {{.*}}addrspace(1) {{.*}}global ptr null

declare ptr @malloc(i64)
declare void @free(ptr)

; CHECK-LABEL: define ptx_kernel void @kernel(
define ptx_kernel void @kernel(ptr %out) #0 {
; CHECK-NOT: @malloc
; CHECK: call ptr @__gpualloc_malloc(i64 32)
; CHECK-NOT: @malloc
; CHECK: call void @__gpualloc_free(
; CHECK-NOT: @malloc
; CHECK: ret void
  %p = call ptr @malloc(i64 32)
  store ptr %p, ptr %out
  %q = load ptr, ptr %out
  call void @free(ptr %q)
  ret void
}

; CHECK: define internal {{.*}}ptr @__gpualloc_malloc(i64 {{.*}} #[[RT:[0-9]+]]
; CHECK: call {{.*}}ptr @malloc(i64
; CHECK: define internal {{.*}}void @__gpualloc_free(ptr
; CHECK-NOT: define {{(dso_local )?}}{{(weak|linkonce)}}

; CHECK: attributes #[[RT]] = { {{.*}}"gpualloc-runtime"{{.*}}"target-cpu"="sm_90" "target-features"="+ptx86,+sm_90" }
; No trace of the runtime's own GPU (sm_75) is left.
; RETARGETED-NOT: sm_75
attributes #0 = { "target-cpu"="sm_90" "target-features"="+ptx86,+sm_90" }

; CHECK: !llvm.module.flags = !{[[FTZ:![0-9]+]]}
; CHECK: [[FTZ]] = !{i32 4, !"nvvm-reflect-ftz", i32 1}
!llvm.module.flags = !{!0}
!0 = !{i32 4, !"nvvm-reflect-ftz", i32 1}
