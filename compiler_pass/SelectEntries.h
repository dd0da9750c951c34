// Chooses, per call site, how the runtime coalesces the warp's requests:
//  - a call of the general malloc entry whose size is warp-uniform (LLVM's
//    uniformity analysis, after inlining: a constant, a kernel argument, a
//    value computed only from such) gets the same-size entry, which skips the
//    partition of the warp by size;
//  - with coalescing turned off for the compile (-gpualloc-no-coalesce),
//    every call gets the per-lane entry.
// Calls in divergent branches, in loops and from partial warps stay correct
// either way: the runtime forms its group from the lanes active at the call.
#pragma once

#include "llvm/IR/PassManager.h"

namespace gpualloc {

// Returns whether the module changed.
bool selectEntryPoints(llvm::Module& M, llvm::ModuleAnalysisManager& AM, bool Optimizing, bool NoCoalesce);

}  // namespace gpualloc
