; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %s | FileCheck %s

; C's malloc and free in device code become the runtime's entry points; the
; call keeps its debug location, and the attributes CUDA's malloc carried
; (noalias, dereferenceable_or_null) are not copied onto the new call.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare noalias ptr @malloc(i64)
declare void @free(ptr)

; CHECK-LABEL: define void @user(
define void @user(ptr %out, i64 %n) !dbg !5 {
; CHECK: %p = call ptr @__gpualloc_malloc(i64 %n), !dbg [[LOC:![0-9]+]]
  %p = call noalias dereferenceable_or_null(16) ptr @malloc(i64 %n), !dbg !8
  store ptr %p, ptr %out
  %q = load ptr, ptr %out
; CHECK: call void @__gpualloc_free(ptr %q), !dbg [[LOC]]
  call void @free(ptr %q), !dbg !8
; CHECK-NOT: @malloc
; CHECK-NOT: @free
; CHECK: ret void
  ret void
}

; Nothing is linked: the strategy is chosen when the program runs
; (libgpualloc joins the module with it at load time).
; CHECK: declare ptr @__gpualloc_malloc(i64)
; CHECK: declare void @__gpualloc_free(ptr)

; CHECK: [[LOC]] = !DILocation(line: 7,

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!3, !4}
!0 = distinct !DICompileUnit(language: DW_LANG_C_plus_plus, file: !1, producer: "clang", isOptimized: false, runtimeVersion: 0, emissionKind: FullDebug)
!1 = !DIFile(filename: "user.cu", directory: "/")
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = !{i32 4, !"nvvm-reflect-ftz", i32 0}
!5 = distinct !DISubprogram(name: "user", scope: !1, file: !1, line: 5, type: !6, unit: !0, spFlags: DISPFlagDefinition)
!6 = !DISubroutineType(types: !7)
!7 = !{null}
!8 = !DILocation(line: 7, column: 3, scope: !5)
