; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %s -o %t.once.ll
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite -S %t.once.ll -o %t.twice.ll
; RUN: %opt -S %t.once.ll -o %t.reparsed.ll
; RUN: diff %t.reparsed.ll %t.twice.ll
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-rewrite,gpualloc-rewrite -S %s | diff %t.once.ll -
; RUN: FileCheck %s < %t.once.ll

; Running the pass again changes nothing: the module is marked after the
; first run, and the runtime's own calls to malloc (cuda strategy) are never
; rewritten, also on a second run (that would make malloc call itself).

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

declare ptr @malloc(i64)

define ptr @user(i64 %n) {
  %p = call ptr @malloc(i64 %n)
  ret ptr %p
}

; CHECK: !gpualloc.rewritten = !{}
