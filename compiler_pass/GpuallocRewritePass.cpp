// gpualloc-rewrite, on NVPTX modules only:
//   1. every use of malloc/free/operator new/delete becomes a use of the
//      runtime's entry points (RewriteCalls.cpp);
//   2. if the module now uses an entry point, the runtime is linked in
//      (LinkRuntime.cpp), with the strategy pinned if -gpualloc-strategy says so;
//   3. the module is marked (named metadata gpualloc.rewritten), and a marked
//      module is left alone: running the pass twice changes nothing.
// The runtime's own module (it defines the entry points) is never touched.
#include "GpuallocRewritePass.h"

#include "AllocationSymbols.h"
#include "LinkRuntime.h"
#include "RewriteCalls.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/TargetParser/Triple.h"

using namespace llvm;

static cl::opt<std::string> PinnedStrategy(
    "gpualloc-strategy", cl::value_desc("name"),
    cl::desc("gpualloc: pin the device allocation strategy at compile time (a GPUALLOC_STRATEGY name)"));

namespace gpualloc {
namespace {

constexpr const char* Marker = "gpualloc.rewritten";

bool usesEntryPoints(const Module& M) {
  for (EntryPoint E : {EntryPoint::Malloc, EntryPoint::Free, EntryPoint::MallocAligned, EntryPoint::FreeAligned})
    if (const Function* F = M.getFunction(entryPointName(E)); F && F->isDeclaration() && !F->use_empty()) return true;
  return false;
}

bool isRuntimeModule(const Module& M) {
  const Function* F = M.getFunction(entryPointName(EntryPoint::Malloc));
  return F && !F->isDeclaration();
}

}  // namespace

PreservedAnalyses GpuallocRewritePass::run(Module& M, ModuleAnalysisManager&) {
  if (!Triple(M.getTargetTriple()).isNVPTX() || M.getNamedMetadata(Marker) || isRuntimeModule(M))
    return PreservedAnalyses::all();

  rewriteAllocationCalls(M);
  if (usesEntryPoints(M)) linkRuntime(M, PinnedStrategy);
  M.getOrInsertNamedMetadata(Marker);
  return PreservedAnalyses::none();
}

}  // namespace gpualloc
