// Invariants:
//  - a load's result and its users are unchanged: the test reads the loaded
//    value and the check only looks (the program's behaviour is the same);
//  - the check's call sits in its own block behind a branch weighted as
//    unlikely, so the common path is the load, a compare and a branch;
//  - the module is instrumented once (gpualloc.reads-checked), and never
//    runtime code (RuntimeAttr): the runtime reads poison and zones itself.
#include "CheckReads.h"

#include "AllocationSymbols.h"
#include "RewriteCalls.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"

using namespace llvm;

namespace gpualloc {
namespace {

constexpr const char* CheckedMarker = "gpualloc.reads-checked";

// NVPTX address spaces that may hold a heap block.
constexpr unsigned GenericSpace = 0;
constexpr unsigned GlobalSpace = 1;

// Bytes checked mode fills freed blocks and red zones with (quarantine.h, checked.h).
constexpr unsigned FreedByte = 0xfd;
constexpr unsigned ZoneByte = 0xc5;

bool mayHoldBlock(unsigned AddressSpace) { return AddressSpace == GenericSpace || AddressSpace == GlobalSpace; }

// Whether L may read a heap block: from global or generic memory, not from
// a local, a global variable or a by-value argument.
bool mayReadBlock(const LoadInst& L) {
  const Value* Ptr = L.getPointerOperand();
  if (!mayHoldBlock(Ptr->getType()->getPointerAddressSpace())) return false;
  const Value* Object = getUnderlyingObject(Ptr, /*MaxLookup=*/0);
  if (isa<AllocaInst>(Object) || isa<GlobalVariable>(Object)) return false;
  if (const auto* Arg = dyn_cast<Argument>(Object); Arg && Arg->hasByValAttr()) return false;
  return mayHoldBlock(Object->getType()->getPointerAddressSpace());
}

// The loaded value as one integer of its bits, or nullptr where its type
// is not a whole number of bytes of at most 16.
Value* asBits(IRBuilder<>& B, LoadInst& L, const DataLayout& DL) {
  Type* T = L.getType();
  Type* Scalar = T->getScalarType();
  if (!T->isSingleValueType() || isa<ScalableVectorType>(T)) return nullptr;
  if (!Scalar->isIntegerTy() && !Scalar->isFloatingPointTy() && !Scalar->isPointerTy()) return nullptr;
  const TypeSize Bits = DL.getTypeSizeInBits(T);
  if (Bits.isScalable() || Bits != DL.getTypeStoreSizeInBits(T)) return nullptr;
  const uint64_t N = Bits.getFixedValue();
  if (N != 8 && N != 16 && N != 32 && N != 64 && N != 128) return nullptr;
  Value* V = &L;
  if (Scalar->isPointerTy()) {
    Type* IntPtr = DL.getIntPtrType(T);
    if (DL.getTypeSizeInBits(IntPtr) != Bits) return nullptr;
    V = B.CreatePtrToInt(V, IntPtr);
  }
  return B.CreateBitCast(V, B.getIntNTy(N));
}

// After L: if its bits are all poison or all zone bytes, call the read check.
bool instrument(LoadInst& L, FunctionCallee Check, const DataLayout& DL) {
  IRBuilder<> B(L.getParent(), std::next(L.getIterator()));
  B.SetCurrentDebugLocation(L.getDebugLoc());
  Value* Bits = asBits(B, L, DL);
  if (Bits == nullptr) return false;
  const unsigned N = Bits->getType()->getIntegerBitWidth();
  Value* Freed = B.CreateICmpEQ(Bits, B.getInt(APInt::getSplat(N, APInt(8, FreedByte))));
  Value* Zone = B.CreateICmpEQ(Bits, B.getInt(APInt::getSplat(N, APInt(8, ZoneByte))));
  Value* Suspect = B.CreateOr(Freed, Zone, "gpualloc.suspect");
  MDNode* Rare = MDBuilder(L.getContext()).createBranchWeights(1, 1u << 20);
  Instruction* Then = SplitBlockAndInsertIfThen(Suspect, B.GetInsertPoint(), /*Unreachable=*/false, Rare);
  IRBuilder<> C(Then);
  C.SetCurrentDebugLocation(L.getDebugLoc());
  Value* Generic = C.CreateAddrSpaceCast(L.getPointerOperand(), C.getPtrTy(GenericSpace));
  C.CreateCall(Check, {Generic, C.getInt64(DL.getTypeStoreSize(L.getType()).getFixedValue())});
  return true;
}

}  // namespace

bool instrumentReads(Module& M) {
  if (M.getNamedMetadata(CheckedMarker)) return false;
  M.getOrInsertNamedMetadata(CheckedMarker);
  const DataLayout& DL = M.getDataLayout();
  SmallVector<LoadInst*, 64> Loads;
  for (Function& F : M) {
    if (F.isDeclaration() || F.hasFnAttribute(RuntimeAttr)) continue;
    for (BasicBlock& BB : F)
      for (Instruction& I : BB)
        if (auto* L = dyn_cast<LoadInst>(&I); L && mayReadBlock(*L)) Loads.push_back(L);
  }
  if (Loads.empty()) return true;
  FunctionCallee Check = M.getOrInsertFunction(entryPointName(EntryPoint::CheckRead),
                                               entryPointType(M.getContext(), EntryPoint::CheckRead));
  for (LoadInst* L : Loads) instrument(*L, Check, DL);
  return true;
}

}  // namespace gpualloc
