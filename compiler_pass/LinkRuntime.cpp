// Invariants:
//  - the runtime module is made to look like part of M before linking: M's
//    triple and data layout, no module flags (they may conflict with M's,
//    e.g. nvvm-reflect-ftz), no identification metadata;
//  - after linking, runtime functions carry M's target-cpu/target-features
//    (the runtime is built for the oldest supported GPU), so they compile
//    for M's GPU and can be inlined into M's kernels;
//  - only HeapGlobal and PinGlobal from the runtime are visible outside M.
#include "LinkRuntime.h"

#include <string>

#include "RewriteCalls.h"
#include "gpualloc/registry.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Transforms/IPO/Internalize.h"

using namespace llvm;

// The runtime bitcode, embedded by RuntimeBitcode.S.
extern "C" const char gpualloc_runtime_bc_start[];
extern "C" const char gpualloc_runtime_bc_end[];

static cl::opt<std::string> RuntimePath(
    "gpualloc-runtime-bc", cl::value_desc("file"),
    cl::desc("gpualloc: link this runtime bitcode (or textual IR) instead of the one built into the plugin"));

namespace gpualloc {
namespace {

void error(Module& M, const Twine& Message) {
  M.getContext().diagnose(DiagnosticInfoGeneric(Twine("gpualloc: ") + Message, DS_Error));
}

std::unique_ptr<Module> loadRuntime(Module& M) {
  LLVMContext& Ctx = M.getContext();
  if (!RuntimePath.empty()) {
    SMDiagnostic Err;
    // clang's context drops value names, and then cannot parse textual IR.
    bool Discard = Ctx.shouldDiscardValueNames();
    Ctx.setDiscardValueNames(false);
    std::unique_ptr<Module> RT = parseIRFile(RuntimePath, Err, Ctx);
    Ctx.setDiscardValueNames(Discard);
    if (!RT) error(M, "cannot read the runtime '" + RuntimePath + "': " + Err.getMessage());
    return RT;
  }
  StringRef Data(gpualloc_runtime_bc_start, gpualloc_runtime_bc_end - gpualloc_runtime_bc_start);
  Expected<std::unique_ptr<Module>> RT = parseBitcodeFile(MemoryBufferRef(Data, "gpualloc-runtime.bc"), Ctx);
  if (!RT) {
    error(M, "the runtime bitcode built into the plugin is unreadable: " + toString(RT.takeError()));
    return nullptr;
  }
  return std::move(*RT);
}

// Sets the pin global of the runtime: Strategy's id, or left at the runtime's
// "none". Either way it becomes a weak_odr constant, so the optimizer folds
// the runtime's strategy dispatch when pinned (and libgpualloc can read it).
bool pinStrategy(Module& M, Module& RT, StringRef Strategy) {
  GlobalVariable* Pin = RT.getGlobalVariable(PinGlobal);
  if (!Pin || !Pin->hasInitializer() || !Pin->getValueType()->isIntegerTy()) {
    if (!Strategy.empty()) error(M, Twine("cannot pin strategy '") + Strategy + "': this runtime has no " + PinGlobal);
    return Strategy.empty();
  }
  if (!Strategy.empty()) {
    const strategy_info* Info = find_strategy(std::string_view(Strategy.data(), Strategy.size()));
    if (!Info) {
      std::string Names;
      for (const strategy_info& S : strategy_table) Names += (Names.empty() ? "" : ", ") + std::string(S.name);
      error(M, Twine("unknown strategy '") + Strategy + "' (valid: " + Names + ")");
      return false;
    }
    Pin->setInitializer(ConstantInt::get(Pin->getValueType(), static_cast<std::uint64_t>(Info->id)));
  }
  Pin->setConstant(true);
  Pin->setLinkage(GlobalValue::WeakODRLinkage);
  Pin->setExternallyInitialized(false);
  return true;
}

void makeLookLikePartOf(Module& RT, const Module& M) {
  RT.setTargetTriple(M.getTargetTriple());
  RT.setDataLayout(M.getDataLayout());
  for (const char* Name : {"llvm.module.flags", "llvm.ident", "nvvmir.version"})
    if (NamedMDNode* MD = RT.getNamedMetadata(Name)) RT.eraseNamedMetadata(MD);
  for (Function& F : RT) {
    if (!F.isDeclaration()) {
      F.addFnAttr(RuntimeAttr);
    } else {  // e.g. CUDA's malloc: declared for the runtime's GPU, defined for any
      F.removeFnAttr("target-cpu");
      F.removeFnAttr("target-features");
    }
  }
}

// M's own target-cpu and target-features, from its first function with them.
std::pair<Attribute, Attribute> userTarget(const Module& M) {
  for (const Function& F : M)
    if (!F.isDeclaration() && !F.hasFnAttribute(RuntimeAttr) && F.hasFnAttribute("target-cpu"))
      return {F.getFnAttribute("target-cpu"), F.getFnAttribute("target-features")};
  return {};
}

void retarget(Module& M, std::pair<Attribute, Attribute> Target) {
  for (Function& F : M) {
    if (!F.hasFnAttribute(RuntimeAttr)) continue;
    F.removeFnAttr("target-cpu");
    F.removeFnAttr("target-features");
    if (Target.first.isValid()) F.addFnAttr(Target.first);
    if (Target.second.isValid()) F.addFnAttr(Target.second);
  }
}

}  // namespace

bool linkRuntime(Module& M, StringRef Strategy) {
  std::unique_ptr<Module> RT = loadRuntime(M);
  if (!RT) return false;
  if (!pinStrategy(M, *RT, Strategy)) return false;
  makeLookLikePartOf(*RT, M);
  std::pair<Attribute, Attribute> Target = userTarget(M);

  auto Internalize = [](Module& Linked, const StringSet<>& FromRuntime) {
    internalizeModule(Linked, [&FromRuntime](const GlobalValue& GV) {
      return !GV.hasName() || !FromRuntime.contains(GV.getName()) || GV.getName() == HeapGlobal ||
             GV.getName() == PinGlobal;
    });
  };
  if (Linker::linkModules(M, std::move(RT), Linker::Flags::LinkOnlyNeeded, Internalize)) {
    error(M, "linking the runtime into the device module failed");
    return true;
  }
  retarget(M, Target);
  return true;
}

}  // namespace gpualloc
