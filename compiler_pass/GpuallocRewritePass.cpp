// Invariants:
//  - the runtime's own modules (they define the entry points) are never
//    touched by either pass;
//  - gpualloc-rewrite marks a module (named metadata gpualloc.rewritten) and
//    leaves a marked module alone: running it twice changes nothing;
//  - gpualloc-finish links a pinned runtime at most once (the marker
//    gpualloc.linked), so an LTO link of pre-linked modules does not link again.
#include "GpuallocRewritePass.h"

#include "AllocationSymbols.h"
#include "CheckReads.h"
#include "LinkRuntime.h"
#include "RewriteCalls.h"
#include "SelectEntries.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/IPO/AlwaysInliner.h"
#include "llvm/Transforms/IPO/GlobalDCE.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Scalar/EarlyCSE.h"
#include "llvm/Transforms/Scalar/SimplifyCFG.h"

using namespace llvm;

static cl::opt<std::string> PinnedStrategy(
    "gpualloc-strategy", cl::value_desc("name"),
    cl::desc("gpualloc: pin the device allocation strategy at compile time (a GPUALLOC_STRATEGY name)"));

static cl::opt<bool> NoCoalesce("gpualloc-no-coalesce",
                                cl::desc("gpualloc: every lane calls the allocator alone (no warp coalescing)"));

static cl::opt<bool> CheckReads("gpualloc-check-reads",
                                cl::desc("gpualloc: loads that read checked mode's poison or red zones call the "
                                         "runtime's read check (reads after free, reads past a block)"));

namespace gpualloc {
namespace {

constexpr const char* RewrittenMarker = "gpualloc.rewritten";
constexpr const char* LinkedMarker = "gpualloc.linked";

bool usesEntryPoints(const Module& M) {
  for (EntryPoint E : AllEntryPoints)
    if (const Function* F = M.getFunction(entryPointName(E)); F && F->isDeclaration() && !F->use_empty()) return true;
  return false;
}

bool isRuntimeModule(const Module& M) {
  const Function* F = M.getFunction(entryPointName(EntryPoint::Malloc));
  return F && !F->isDeclaration() && !M.getNamedMetadata(LinkedMarker);
}

bool isDeviceModule(const Module& M) { return Triple(M.getTargetTriple()).isNVPTX(); }

// After linking a pinned runtime: its entry points inline into the user's
// code, the strategy's dead paths fold away, the unused runtime goes.
void inlineRuntime(Module& M, ModuleAnalysisManager& AM) {
  AlwaysInlinerPass(/*InsertLifetimeIntrinsics=*/false).run(M, AM);
  FunctionAnalysisManager& FAM = AM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
  for (Function& F : M) {
    if (F.isDeclaration()) continue;
    FAM.invalidate(F, PreservedAnalyses::none());
    InstCombinePass().run(F, FAM);
    EarlyCSEPass(/*UseMemorySSA=*/false).run(F, FAM);
    SimplifyCFGPass().run(F, FAM);
  }
  AM.invalidate(M, PreservedAnalyses::none());
  GlobalDCEPass().run(M, AM);
}

}  // namespace

PreservedAnalyses GpuallocRewritePass::run(Module& M, ModuleAnalysisManager&) {
  if (!isDeviceModule(M) || M.getNamedMetadata(RewrittenMarker) || isRuntimeModule(M)) return PreservedAnalyses::all();
  rewriteAllocationCalls(M);
  M.getOrInsertNamedMetadata(RewrittenMarker);
  return PreservedAnalyses::none();
}

PreservedAnalyses GpuallocFinishPass::run(Module& M, ModuleAnalysisManager& AM) {
  if (!isDeviceModule(M) || isRuntimeModule(M) || M.getNamedMetadata(LinkedMarker)) return PreservedAnalyses::all();
  const bool Optimizing = Level != OptimizationLevel::O0;
  bool Changed = selectEntryPoints(M, AM, Optimizing, NoCoalesce);
  if (CheckReads) Changed |= instrumentReads(M);
  if (!PinnedStrategy.empty() && usesEntryPoints(M)) {
    if (linkRuntime(M, PinnedStrategy, Optimizing)) {
      M.getOrInsertNamedMetadata(LinkedMarker);
      if (Optimizing) inlineRuntime(M, AM);
      Changed = true;
    }
  }
  return Changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

}  // namespace gpualloc
