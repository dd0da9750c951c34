// Invariants:
//  - after rewriteAllocationCalls, no function outside the runtime calls or
//    refers to a replaced symbol;
//  - a direct call becomes a direct call of the entry point with the same
//    debug location, so after linking the runtime the inliner can inline it;
//  - any other use (address taken, invoke, mismatched call type) refers to
//    the entry point itself when the types agree, else to a small internal
//    thunk with the original signature.
#include "RewriteCalls.h"

#include "AllocationSymbols.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"

using namespace llvm;

namespace gpualloc {
namespace {

bool isRuntimeCode(const Instruction* I) { return I->getFunction()->hasFnAttribute(RuntimeAttr); }

bool hasNeededArgs(const AllocationSymbol& S, unsigned NumArgs) {
  return S.ValueArg < NumArgs && (S.AlignArg < 0 || static_cast<unsigned>(S.AlignArg) < NumArgs);
}

// Emits the call of the entry point for a call of S with arguments Args;
// returns the call's result converted to ResultTy (null when ResultTy is void).
Value* emitEntryCall(IRBuilder<>& B, FunctionCallee Entry, const AllocationSymbol& S, ArrayRef<Value*> Args,
                     Type* ResultTy) {
  Type* I64 = B.getInt64Ty();
  Type* Ptr = B.getPtrTy();
  SmallVector<Value*, 2> EntryArgs;
  Value* V = Args[S.ValueArg];
  if (S.Entry == EntryPoint::Malloc || S.Entry == EntryPoint::MallocAligned)
    EntryArgs.push_back(B.CreateZExtOrTrunc(V, I64));
  else
    EntryArgs.push_back(V->getType()->isPointerTy() ? B.CreatePointerBitCastOrAddrSpaceCast(V, Ptr)
                                                     : B.CreateIntToPtr(V, Ptr));
  if (S.AlignArg >= 0) EntryArgs.push_back(B.CreateZExtOrTrunc(Args[S.AlignArg], I64));

  CallInst* Call = B.CreateCall(Entry, EntryArgs);
  if (ResultTy->isVoidTy()) return nullptr;
  if (Call->getType()->isVoidTy()) return PoisonValue::get(ResultTy);
  if (ResultTy->isPointerTy()) return B.CreatePointerBitCastOrAddrSpaceCast(Call, ResultTy);
  return B.CreatePtrToInt(Call, ResultTy);
}

// An internal function with F's signature that calls the entry point: what a
// use of F that is not a plain direct call refers to.
Function* getOrCreateThunk(Module& M, Function& F, const AllocationSymbol& S, FunctionCallee Entry) {
  std::string Name = ("__gpualloc_thunk." + F.getName()).str();
  if (Function* Existing = M.getFunction(Name)) return Existing;
  Function* Thunk = Function::Create(F.getFunctionType(), GlobalValue::InternalLinkage, F.getAddressSpace(), Name, &M);
  Thunk->setCallingConv(F.getCallingConv());
  IRBuilder<> B(BasicBlock::Create(M.getContext(), "entry", Thunk));
  SmallVector<Value*, 4> Args;
  for (Argument& A : Thunk->args()) Args.push_back(&A);
  Value* Result = emitEntryCall(B, Entry, S, Args, Thunk->getReturnType());
  if (Result)
    B.CreateRet(Result);
  else
    B.CreateRetVoid();
  return Thunk;
}

// Rewrites all uses of F, a definition or declaration of symbol S.
void rewriteUses(Module& M, Function& F, const AllocationSymbol& S) {
  FunctionCallee Entry = M.getOrInsertFunction(entryPointName(S.Entry), entryPointType(M.getContext(), S.Entry));

  SmallVector<CallInst*, 16> DirectCalls;
  for (Use& U : F.uses()) {
    auto* Call = dyn_cast<CallInst>(U.getUser());
    if (Call && Call->isCallee(&U) && !isRuntimeCode(Call) && Call->getFunctionType() == F.getFunctionType() &&
        hasNeededArgs(S, Call->arg_size()))
      DirectCalls.push_back(Call);
  }
  for (CallInst* Call : DirectCalls) {
    IRBuilder<> B(Call);  // new instructions get the call's debug location
    SmallVector<Value*, 4> Args(Call->args());
    Value* Result = emitEntryCall(B, Entry, S, Args, Call->getType());
    if (Result) {
      if (isa<Instruction>(Result)) Result->takeName(Call);
      Call->replaceAllUsesWith(Result);
    }
    Call->eraseFromParent();
  }

  // What is left: function pointers, constant initialisers, invokes, calls
  // through a mismatched type. Uses inside runtime code keep the original.
  auto NotRuntime = [](Use& U) {
    auto* I = dyn_cast<Instruction>(U.getUser());
    return !I || !isRuntimeCode(I);
  };
  if (F.use_empty()) return;
  auto* EntryFn = cast<Function>(Entry.getCallee());
  Function* Replacement = EntryFn->getFunctionType() == F.getFunctionType() && EntryFn->getAddressSpace() == F.getAddressSpace()
                              ? EntryFn
                              : getOrCreateThunk(M, F, S, Entry);
  if (!hasNeededArgs(S, F.getFunctionType()->getNumParams()) && Replacement != EntryFn) {
    M.getContext().diagnose(DiagnosticInfoGeneric(
        Twine("gpualloc: cannot replace '") + F.getName() + "': its declaration has an unexpected signature", DS_Error));
    Replacement->eraseFromParent();
    return;
  }
  F.replaceUsesWithIf(Replacement, NotRuntime);
}

void diagnoseUnsupported(Module& M) {
  for (const UnsupportedSymbol& U : unsupportedSymbols()) {
    Function* F = M.getFunction(U.Name);
    if (!F) continue;
    bool Reported = false;
    for (User* Usr : F->users()) {
      auto* I = dyn_cast<Instruction>(Usr);
      if (!I || isRuntimeCode(I)) continue;
      M.getContext().diagnose(DiagnosticInfoUnsupported(
          *I->getFunction(), Twine("gpualloc does not support '") + U.Name + "': " + U.Reason, I->getDebugLoc()));
      Reported = true;
    }
    if (!Reported && !F->use_empty())
      M.getContext().diagnose(
          DiagnosticInfoGeneric(Twine("gpualloc does not support '") + U.Name + "': " + U.Reason, DS_Error));
  }
}

}  // namespace

bool rewriteAllocationCalls(Module& M) {
  diagnoseUnsupported(M);

  SmallVector<std::pair<Function*, const AllocationSymbol*>, 8> Found;
  for (const AllocationSymbol& S : allocationSymbols())
    if (Function* F = M.getFunction(S.Name)) Found.push_back({F, &S});
  if (Found.empty()) return false;

  for (auto [F, S] : Found) rewriteUses(M, *F, *S);

  // Definitions clang's <new> wrappers emit (linkonce_odr) and declarations
  // nothing refers to any more go away; a strong definition stays.
  for (auto [F, S] : Found)
    if (F->use_empty() && (F->isDeclaration() || F->isDiscardableIfUnused())) F->eraseFromParent();
  return true;
}

}  // namespace gpualloc
