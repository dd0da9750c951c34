// Invariants:
//  - only direct calls of the general entries, outside runtime code, change;
//    the callee changes, the arguments do not;
//  - a same-size entry is chosen only where the uniformity analysis proves
//    the size uniform: anything it cannot prove keeps the general entry.
#include "SelectEntries.h"

#include "AllocationSymbols.h"
#include "RewriteCalls.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/UniformityAnalysis.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"

using namespace llvm;

namespace gpualloc {
namespace {

// The entry a call of `From` (a general entry) should use instead, or From.
EntryPoint choose(EntryPoint From, const CallInst& Call, const UniformityInfo* UI, bool NoCoalesce) {
  if (NoCoalesce) return laneVariant(From);
  if (From == EntryPoint::Malloc && UI != nullptr && UI->isUniform(Call.getArgOperand(0)))
    return EntryPoint::MallocSameSize;
  return From;
}

}  // namespace

bool selectEntryPoints(Module& M, ModuleAnalysisManager& AM, bool Optimizing, bool NoCoalesce) {
  if (!Optimizing && !NoCoalesce) return false;
  FunctionAnalysisManager& FAM = AM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();
  bool Changed = false;
  for (EntryPoint From : {EntryPoint::Malloc, EntryPoint::Free, EntryPoint::MallocAligned, EntryPoint::FreeAligned}) {
    Function* General = M.getFunction(entryPointName(From));
    if (General == nullptr) continue;
    SmallVector<CallInst*, 16> Calls;
    for (User* U : General->users())
      if (auto* Call = dyn_cast<CallInst>(U); Call && Call->getCalledFunction() == General &&
                                              !Call->getFunction()->hasFnAttribute(RuntimeAttr))
        Calls.push_back(Call);
    for (CallInst* Call : Calls) {
      const UniformityInfo* UI =
          Optimizing && From == EntryPoint::Malloc ? &FAM.getResult<UniformityInfoAnalysis>(*Call->getFunction()) : nullptr;
      const EntryPoint To = choose(From, *Call, UI, NoCoalesce);
      if (To == From) continue;
      FunctionCallee Target = M.getOrInsertFunction(entryPointName(To), entryPointType(M.getContext(), To));
      Call->setCalledFunction(Target);
      Changed = true;
    }
  }
  return Changed;
}

}  // namespace gpualloc
