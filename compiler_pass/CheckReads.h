// Checked mode's read check (-gpualloc-check-reads; gpualloc-clang++
// --gpualloc-check-reads): after each load from global or generic memory
// that may read a heap block, the loaded bits are compared with checked
// mode's poison (every byte 0xfd, a quarantined block) and red-zone pattern
// (every byte 0xc5); only on a match does the load call the runtime's read
// check (__gpualloc_check_read(ptr, size), runtime/include/gpualloc/read_check.h),
// which looks at the heap. Everywhere else a checked load costs a compare
// and a branch the hardware predicts.
//
// Not instrumented: loads of locals, of globals, of shared, local or
// constant memory (no heap block lies there), loads whose type is not a
// whole number of bytes of at most 16 (aggregates, i1), runtime code, and
// memory intrinsics (memcpy, memmove from a block).
#pragma once

namespace llvm {
class Module;
}

namespace gpualloc {

// Instruments the module's loads, once (the marker gpualloc.reads-checked).
// Returns whether the module changed.
bool instrumentReads(llvm::Module& M);

}  // namespace gpualloc
