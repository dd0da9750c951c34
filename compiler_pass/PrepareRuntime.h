// gpualloc-prepare-runtime: turns one strategy's runtime bitcode into the
// module whose PTX libgpualloc joins with unpinned user modules at load time
// (runtime/CMakeLists.txt runs it while compiling lib/runtime/<name>.ptx).
//
// Afterwards the module's only visible names are abi.h's heap and ABI
// globals; the entry points are internal but kept (llvm.used), so in PTX
// they are plain `.func`s that the user's calls bind to once joined; every
// other symbol is internal and renamed with abi::runtime_private_prefix, so
// it cannot collide with a name of the user's module (a `$str` of printf,
// a template both instantiate). The pin marker is dropped: this runtime
// serves modules compiled without a pin.
#pragma once

#include "llvm/IR/PassManager.h"

namespace gpualloc {

class PrepareRuntimePass : public llvm::PassInfoMixin<PrepareRuntimePass> {
 public:
  llvm::PreservedAnalyses run(llvm::Module& M, llvm::ModuleAnalysisManager& AM);
  static bool isRequired() { return true; }
};

}  // namespace gpualloc
