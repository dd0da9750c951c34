; REQUIRES: clang
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-check-reads -passes=gpualloc-finish -S %s | FileCheck %s
; RUN: %opt -load-pass-plugin=%pass-plugin -passes=gpualloc-finish -S %s | FileCheck %s --check-prefix=OFF
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-check-reads -passes=gpualloc-finish,gpualloc-finish -S %s \
; RUN:   | FileCheck %s --check-prefix=ONCE
; RUN: %opt -load-pass-plugin=%pass-plugin -gpualloc-check-reads -gpualloc-strategy=atomic -passes='default<O2>' -S %s \
; RUN:   | FileCheck %s --check-prefix=PINNED

; With -gpualloc-check-reads (gpualloc-clang++ --gpualloc-check-reads), a
; load that may read a heap block (global or generic memory, not a local, a
; global variable or shared memory) compares its bits with checked mode's
; poison (every byte 0xfd) and red zones (every byte 0xc5), and only then
; calls the runtime's read check with a generic pointer and the bytes read;
; the loaded value goes on unchanged. A type that is not a whole number of
; bytes up to 16 is not checked. Pinned, the check stays a call (into the
; linked runtime) behind a branch weighted as rare (at -O2 a switch).

target datalayout = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"

@table = addrspace(1) global [4 x i32] zeroinitializer
@tile = addrspace(3) global [4 x i32] undef

; CHECK-LABEL: define ptx_kernel void @generic_int(
; CHECK: %v = load i32, ptr %p
; CHECK-NEXT: %[[F:.+]] = icmp eq i32 %v, -33686019
; CHECK-NEXT: %[[Z:.+]] = icmp eq i32 %v, -976894523
; CHECK-NEXT: %[[S:.+]] = or i1 %[[F]], %[[Z]]
; CHECK-NEXT: br i1 %[[S]], label %[[THEN:.+]], label %[[JOIN:.+]], !prof ![[RARE:[0-9]+]]
; CHECK: [[THEN]]:
; CHECK-NEXT: call void @__gpualloc_check_read(ptr %p, i64 4)
; CHECK-NEXT: br label %[[JOIN]]
; CHECK: [[JOIN]]:
; CHECK-NEXT: store i32 %v, ptr %out
; OFF-LABEL: define ptx_kernel void @generic_int(
; OFF-NOT: icmp
; OFF-NOT: __gpualloc_check_read
; OFF: ret void
; ONCE-LABEL: define ptx_kernel void @generic_int(
; ONCE-COUNT-1: call void @__gpualloc_check_read
; ONCE-NOT: call void @__gpualloc_check_read
; ONCE: ret void
; PINNED-LABEL: define ptx_kernel void @generic_int(
; PINNED: i32 -33686019, label
; PINNED: call void @__gpualloc_check_read(
define ptx_kernel void @generic_int(ptr %p, ptr %out) {
  %v = load i32, ptr %p
  store i32 %v, ptr %out
  ret void
}

; A float from global memory: its bits compared, the pointer made generic.
; CHECK-LABEL: define ptx_kernel void @global_float(
; CHECK: %v = load float, ptr addrspace(1) %p
; CHECK-NEXT: %[[B:.+]] = bitcast float %v to i32
; CHECK-NEXT: icmp eq i32 %[[B]], -33686019
; CHECK: %[[G:.+]] = addrspacecast ptr addrspace(1) %p to ptr
; CHECK-NEXT: call void @__gpualloc_check_read(ptr %[[G]], i64 4)
define ptx_kernel void @global_float(ptr addrspace(1) %p, ptr %out) {
  %v = load float, ptr addrspace(1) %p
  store float %v, ptr %out
  ret void
}

; A pointer, a 16-byte vector and a byte, each at its size.
; CHECK-LABEL: define ptx_kernel void @sizes(
; CHECK: %a = load ptr, ptr %p
; CHECK-NEXT: %[[I:.+]] = ptrtoint ptr %a to i64
; CHECK-NEXT: icmp eq i64 %[[I]], -144680345676153347
; CHECK: call void @__gpualloc_check_read(ptr %p, i64 8)
; CHECK: %b = load <4 x i32>, ptr %p
; CHECK-NEXT: %[[W:.+]] = bitcast <4 x i32> %b to i128
; CHECK-NEXT: icmp eq i128 %[[W]], -2668881309183831085987251822994260483
; CHECK: call void @__gpualloc_check_read(ptr %p, i64 16)
; CHECK: %c = load i8, ptr %p
; CHECK-NEXT: icmp eq i8 %c, -3
; CHECK-NEXT: icmp eq i8 %c, -59
; CHECK: call void @__gpualloc_check_read(ptr %p, i64 1)
; CHECK: ret void
define ptx_kernel void @sizes(ptr %p, ptr %out) {
  %a = load ptr, ptr %p
  store ptr %a, ptr %out
  %b = load <4 x i32>, ptr %p
  store <4 x i32> %b, ptr %out
  %c = load i8, ptr %p
  store i8 %c, ptr %out
  ret void
}

; Nothing a heap block can be: a local, a global variable (also through a
; generic pointer), shared memory; nor a type that is not whole bytes.
; CHECK-LABEL: define ptx_kernel void @not_checked(
; CHECK-NOT: __gpualloc_check_read
; CHECK: ret void
define ptx_kernel void @not_checked(ptr %p, ptr %out, i32 %i) {
  %local = alloca i32
  store i32 %i, ptr %local
  %a = load volatile i32, ptr %local
  store i32 %a, ptr %out
  %in.table = getelementptr [4 x i32], ptr addrspace(1) @table, i32 0, i32 %i
  %b = load i32, ptr addrspace(1) %in.table
  store i32 %b, ptr %out
  %generic.table = addrspacecast ptr addrspace(1) @table to ptr
  %c = load i32, ptr %generic.table
  store i32 %c, ptr %out
  %in.tile = getelementptr [4 x i32], ptr addrspace(3) @tile, i32 0, i32 %i
  %d = load i32, ptr addrspace(3) %in.tile
  store i32 %d, ptr %out
  %e = load i1, ptr %p
  store i1 %e, ptr %out
  %f = load { i32, i32 }, ptr %p
  store { i32, i32 } %f, ptr %out
  ret void
}

; CHECK: declare void @__gpualloc_check_read(ptr, i64)
; CHECK: ![[RARE]] = !{!"branch_weights", i32 1, i32 1048576}
; PINNED: define internal void @__gpualloc_check_read(
