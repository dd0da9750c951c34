// Rewrites the uses of device allocation functions into the runtime's entry
// points (see AllocationSymbols.h).
#pragma once

namespace llvm {
class Module;
}

namespace gpualloc {

// Function attribute marking code linked in from the gpualloc runtime; calls
// in such functions are never rewritten (the runtime's `cuda` strategy calls
// CUDA's own malloc/free).
inline constexpr const char* RuntimeAttr = "gpualloc-runtime";

// Replaces every call and every other use (a function pointer, a constant
// initialiser) of the functions in allocationSymbols() outside runtime code,
// erases replaced definitions nothing uses any more, and reports a use of an
// unsupported function as an error through the LLVMContext. Returns whether
// the module changed.
bool rewriteAllocationCalls(llvm::Module& M);

}  // namespace gpualloc
