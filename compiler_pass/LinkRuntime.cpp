// Invariants:
//  - the runtime module is made to look like part of M before linking: M's
//    triple and data layout, no module flags (they may conflict with M's,
//    e.g. nvvm-reflect-ftz), no identification metadata;
//  - after linking, runtime functions carry M's target-cpu/target-features
//    (the runtime is built for the oldest supported GPU), so they compile
//    for M's GPU and can be inlined into M's kernels; its fences (abi.h's
//    inline assembly) are LLVM fences at device scope, which the backend
//    makes one-way where M's GPU has them;
//  - only abi.h's module globals (heap, ABI version, pin marker) from the
//    runtime are visible outside M; they are weak, so a module may hold the
//    runtime twice (-fgpu-rdc translation units) and keep one heap.
#include "LinkRuntime.h"

#include <string>

#include "AllocationSymbols.h"
#include "RewriteCalls.h"
#include "embedded_file.h"
#include "gpualloc/abi.h"
#include "gpualloc/registry.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/InlineAsm.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Transforms/IPO/Internalize.h"
#include "llvm/Transforms/Utils/ModuleUtils.h"

using namespace llvm;

// The runtime bitcode of every strategy, embedded by cmake/Embed.cmake.
extern "C" const gpualloc::embedded_file gpualloc_runtime_bitcode[];

static cl::opt<std::string> RuntimePath(
    "gpualloc-runtime-bc", cl::value_desc("file"),
    cl::desc("gpualloc: link this runtime bitcode (or textual IR) instead of the strategy's one in the plugin"));

namespace gpualloc {
namespace {

StringRef ref(std::string_view S) { return StringRef(S.data(), S.size()); }

void error(Module& M, const Twine& Message) {
  M.getContext().diagnose(DiagnosticInfoGeneric(Twine("gpualloc: ") + Message, DS_Error));
}

std::unique_ptr<Module> loadRuntime(Module& M, StringRef Strategy) {
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
  const embedded_file* File = find_embedded(gpualloc_runtime_bitcode, std::string_view(Strategy.data(), Strategy.size()));
  if (File == nullptr) {
    std::string Names;
    for (const strategy_info& S : strategy_table) Names += (Names.empty() ? "" : ", ") + std::string(S.name);
    error(M, Twine("unknown strategy '") + Strategy + "' (valid: " + Names + ")");
    return nullptr;
  }
  Expected<std::unique_ptr<Module>> RT =
      parseBitcodeFile(MemoryBufferRef(ref(File->text()), (Strategy + ".bc").str()), Ctx);
  if (!RT) {
    error(M, "the runtime bitcode built into the plugin is unreadable: " + toString(RT.takeError()));
    return nullptr;
  }
  return std::move(*RT);
}

// The runtime's globals that stay visible: heap, ABI version, pin marker.
bool isModuleGlobal(StringRef Name) {
  return Name == ref(abi::heap_variable) || Name == ref(abi::abi_variable) || Name.starts_with(ref(abi::pin_prefix));
}

bool isEntryPoint(StringRef Name) {
  for (EntryPoint E : AllEntryPoints)
    if (Name == entryPointName(E)) return true;
  return false;
}

void makeLookLikePartOf(Module& RT, const Module& M, bool Inline) {
  RT.setTargetTriple(M.getTargetTriple());
  RT.setDataLayout(M.getDataLayout());
  for (const char* Name : {"llvm.module.flags", "llvm.ident", "nvvmir.version"})
    if (NamedMDNode* MD = RT.getNamedMetadata(Name)) RT.eraseNamedMetadata(MD);
  for (Function& F : RT) {
    if (!F.isDeclaration()) {
      F.addFnAttr(RuntimeAttr);
      // The read check stays a call: the pass calls it from every checked load's rare path.
      if (Inline && isEntryPoint(F.getName()) && F.getName() != entryPointName(EntryPoint::CheckRead))
        F.addFnAttr(Attribute::AlwaysInline);
    } else {  // e.g. CUDA's malloc: declared for the runtime's GPU, defined for any
      F.removeFnAttr("target-cpu");
      F.removeFnAttr("target-features");
    }
  }
}

// abi.h's fences, written as inline assembly for the runtime's GPU, made
// LLVM fences at device scope.
void lowerFences(Module& RT) {
  LLVMContext& Ctx = RT.getContext();
  const SyncScope::ID Device = Ctx.getOrInsertSyncScopeID("device");
  SmallVector<std::pair<CallInst*, AtomicOrdering>, 16> Fences;
  for (Function& F : RT)
    for (Instruction& I : instructions(F))
      if (auto* Call = dyn_cast<CallInst>(&I))
        if (auto* Asm = dyn_cast<InlineAsm>(Call->getCalledOperand())) {
          if (Asm->getAsmString() == ref(abi::release_fence_asm)) Fences.push_back({Call, AtomicOrdering::Release});
          if (Asm->getAsmString() == ref(abi::acquire_fence_asm)) Fences.push_back({Call, AtomicOrdering::Acquire});
        }
  for (auto [Call, Order] : Fences) {
    new FenceInst(Ctx, Order, Device, Call->getIterator());
    Call->eraseFromParent();
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

bool linkRuntime(Module& M, StringRef Strategy, bool Inline) {
  std::unique_ptr<Module> RT = loadRuntime(M, Strategy);
  if (!RT) return false;
  const std::string Pin = abi::pin_symbol(std::string_view(Strategy.data(), Strategy.size()));
  if (!RT->getGlobalVariable(Pin)) {
    error(M, Twine("the runtime for '") + Strategy + "' lacks its pin marker " + Pin);
    return false;
  }
  makeLookLikePartOf(*RT, M, Inline);
  lowerFences(*RT);
  // The module globals are for libgpualloc, which finds them by name: keep
  // them even where nothing in M uses them.
  SmallVector<GlobalValue*, 4> Kept;
  for (GlobalVariable& G : RT->globals())
    if (isModuleGlobal(G.getName())) Kept.push_back(&G);
  appendToUsed(*RT, Kept);
  std::pair<Attribute, Attribute> Target = userTarget(M);

  auto Internalize = [](Module& Linked, const StringSet<>& FromRuntime) {
    internalizeModule(Linked, [&FromRuntime](const GlobalValue& GV) {
      return !GV.hasName() || !FromRuntime.contains(GV.getName()) || isModuleGlobal(GV.getName());
    });
  };
  if (Linker::linkModules(M, std::move(RT), Linker::Flags::None, Internalize)) {
    error(M, "linking the runtime into the device module failed");
    return true;
  }
  retarget(M, Target);
  return true;
}

}  // namespace gpualloc
