// The two module passes that make a device module allocate through gpualloc.
//
//   gpualloc-rewrite  (start of every pipeline, also at -O0): every use of a
//                     device allocation function becomes a use of a runtime
//                     entry point (RewriteCalls.h).
//   gpualloc-finish   (end of the optimisation pipeline, after inlining):
//                     each call site gets its entry point (SelectEntries.h);
//                     with a pinned strategy (-gpualloc-strategy) that
//                     strategy's runtime is linked and inlined (LinkRuntime.h).
//                     Unpinned, the entry points stay external: gpualloc-ptxas
//                     and libgpualloc join the module with the strategy chosen
//                     at run time (abi.h).
#pragma once

#include "llvm/IR/PassManager.h"
#include "llvm/Passes/OptimizationLevel.h"

namespace gpualloc {

class GpuallocRewritePass : public llvm::PassInfoMixin<GpuallocRewritePass> {
 public:
  llvm::PreservedAnalyses run(llvm::Module& M, llvm::ModuleAnalysisManager& AM);
  static bool isRequired() { return true; }  // also at -O0 and on optnone code
};

class GpuallocFinishPass : public llvm::PassInfoMixin<GpuallocFinishPass> {
 public:
  explicit GpuallocFinishPass(llvm::OptimizationLevel Level) : Level(Level) {}
  llvm::PreservedAnalyses run(llvm::Module& M, llvm::ModuleAnalysisManager& AM);
  static bool isRequired() { return true; }

 private:
  llvm::OptimizationLevel Level;
};

}  // namespace gpualloc
