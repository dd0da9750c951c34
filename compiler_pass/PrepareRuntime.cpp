#include "PrepareRuntime.h"

#include <string>

#include "AllocationSymbols.h"
#include "gpualloc/abi.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/IPO/GlobalDCE.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

using namespace llvm;

namespace gpualloc {
namespace {

StringRef ref(std::string_view S) { return StringRef(S.data(), S.size()); }

bool isEntryPoint(StringRef Name) {
  for (EntryPoint E : AllEntryPoints)
    if (Name == entryPointName(E)) return true;
  return false;
}

}  // namespace

PreservedAnalyses PrepareRuntimePass::run(Module& M, ModuleAnalysisManager& AM) {
  SmallVector<GlobalVariable*, 2> Pins;
  for (GlobalVariable& G : M.globals())
    if (G.getName().starts_with(ref(abi::pin_prefix))) Pins.push_back(&G);
  for (GlobalVariable* G : Pins) {
    removeFromUsedLists(M, [G](Constant* C) { return C == G; });
    G->eraseFromParent();
  }

  SmallVector<GlobalValue*, 16> Entries;
  const std::string Prefix(abi::runtime_private_prefix);
  for (GlobalValue& GV : M.global_values()) {
    if (GV.isDeclaration() || GV.getName().starts_with("llvm.")) continue;
    const StringRef Name = GV.getName();
    if (Name == ref(abi::heap_variable) || Name == ref(abi::abi_variable)) continue;
    if (isEntryPoint(Name)) Entries.push_back(&GV);
    else if (!Name.starts_with(Prefix)) GV.setName(Prefix + Name);
    GV.setLinkage(GlobalValue::InternalLinkage);
    GV.setVisibility(GlobalValue::DefaultVisibility);
    if (auto* Object = dyn_cast<GlobalObject>(&GV)) Object->setComdat(nullptr);
  }
  appendToUsed(M, Entries);
  GlobalDCEPass().run(M, AM);
  return PreservedAnalyses::none();
}

}  // namespace gpualloc
