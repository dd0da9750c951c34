// The plugin's entry: registers gpualloc-rewrite by name (for opt
// -passes=gpualloc-rewrite) and at the start of every default pipeline, so
// clang -fpass-plugin runs it before optimisation at every -O level and the
// inliner sees the runtime.
#include "GpuallocRewritePass.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Plugins/PassPlugin.h"

using namespace llvm;

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "gpualloc", "0.1", [](PassBuilder& PB) {
            PB.registerPipelineStartEPCallback([](ModulePassManager& MPM, OptimizationLevel) {
              MPM.addPass(gpualloc::GpuallocRewritePass());
            });
            PB.registerPipelineParsingCallback(
                [](StringRef Name, ModulePassManager& MPM, ArrayRef<PassBuilder::PipelineElement>) {
                  if (Name != "gpualloc-rewrite") return false;
                  MPM.addPass(gpualloc::GpuallocRewritePass());
                  return true;
                });
          }};
}
