// gpualloc-rewrite: makes a device module allocate through gpualloc.
#pragma once

#include "llvm/IR/PassManager.h"

namespace gpualloc {

class GpuallocRewritePass : public llvm::PassInfoMixin<GpuallocRewritePass> {
 public:
  llvm::PreservedAnalyses run(llvm::Module& M, llvm::ModuleAnalysisManager& AM);
  static bool isRequired() { return true; }  // also at -O0 and on optnone code
};

}  // namespace gpualloc
