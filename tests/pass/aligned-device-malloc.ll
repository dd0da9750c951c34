; REQUIRES: clang
; RUN: not %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -disable-output %s 2>&1 | FileCheck %s

; __nv_aligned_device_malloc cannot be supported (its result is freed with
; plain free, which cannot know the alignment): using it is a compile error
; that names it, at the call's source location.

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare ptr @__nv_aligned_device_malloc(i64, i64)

; CHECK: error: aligned.cu:12:7: in function kernel {{.*}}: gpualloc does not support '__nv_aligned_device_malloc': its result is released with plain free()
define void @kernel(ptr %out) !dbg !5 {
  %p = call ptr @__nv_aligned_device_malloc(i64 64, i64 128), !dbg !8
  store ptr %p, ptr %out
  ret void
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!3}
!0 = distinct !DICompileUnit(language: DW_LANG_C_plus_plus, file: !1, producer: "clang", isOptimized: false, runtimeVersion: 0, emissionKind: FullDebug)
!1 = !DIFile(filename: "aligned.cu", directory: "/")
!3 = !{i32 2, !"Debug Info Version", i32 3}
!5 = distinct !DISubprogram(name: "kernel", scope: !1, file: !1, line: 10, type: !6, unit: !0, spFlags: DISPFlagDefinition)
!6 = !DISubroutineType(types: !7)
!7 = !{null}
!8 = !DILocation(line: 12, column: 7, scope: !5)
