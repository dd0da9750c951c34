// The plugin's entry: registers gpualloc-rewrite at the start and
// gpualloc-finish at the end of every default pipeline (clang -fpass-plugin
// runs both at every -O level), gpualloc-prepare-runtime at the end when
// -gpualloc-prepare-runtime is given (building the runtime's PTX), and all
// three by name for opt -passes=.
#include "GpuallocRewritePass.h"
#include "PrepareRuntime.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;

static cl::opt<bool> PrepareRuntime("gpualloc-prepare-runtime",
                                    cl::desc("gpualloc: prepare a runtime module for load-time joining (build step)"));

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "gpualloc", "0.2", [](PassBuilder& PB) {
            PB.registerPipelineStartEPCallback([](ModulePassManager& MPM, OptimizationLevel) {
              MPM.addPass(gpualloc::GpuallocRewritePass());
            });
            PB.registerOptimizerLastEPCallback([](ModulePassManager& MPM, OptimizationLevel Level, ThinOrFullLTOPhase) {
              if (PrepareRuntime)
                MPM.addPass(gpualloc::PrepareRuntimePass());
              else
                MPM.addPass(gpualloc::GpuallocFinishPass(Level));
            });
            PB.registerPipelineParsingCallback(
                [](StringRef Name, ModulePassManager& MPM, ArrayRef<PassBuilder::PipelineElement>) {
                  if (Name == "gpualloc-rewrite") {
                    MPM.addPass(gpualloc::GpuallocRewritePass());
                    return true;
                  }
                  if (Name == "gpualloc-finish") {
                    MPM.addPass(gpualloc::GpuallocFinishPass(OptimizationLevel::O2));
                    return true;
                  }
                  if (Name == "gpualloc-prepare-runtime") {
                    MPM.addPass(gpualloc::PrepareRuntimePass());
                    return true;
                  }
                  return false;
                });
          }};
}
