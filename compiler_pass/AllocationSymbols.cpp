#include "AllocationSymbols.h"

#include "gpualloc/abi.h"
#include "llvm/IR/DerivedTypes.h"
#include "llvm/Support/ErrorHandling.h"

namespace gpualloc {
namespace {

using E = EntryPoint;

// size_t is unsigned long (m) on nvptx64; std::align_val_t is St11align_val_t;
// const std::nothrow_t& is RKSt9nothrow_t.
const AllocationSymbol Symbols[] = {
    // C
    {"malloc", E::Malloc, 0, -1},
    {"free", E::Free, 0, -1},

    // operator new / new[] (size), nothrow (size, nothrow)
    {"_Znwm", E::Malloc, 0, -1},
    {"_Znam", E::Malloc, 0, -1},
    {"_ZnwmRKSt9nothrow_t", E::Malloc, 0, -1},
    {"_ZnamRKSt9nothrow_t", E::Malloc, 0, -1},
    // ... with the memory profiler's __hot_cold_t hint appended
    {"_Znwm12__hot_cold_t", E::Malloc, 0, -1},
    {"_Znam12__hot_cold_t", E::Malloc, 0, -1},
    {"_ZnwmRKSt9nothrow_t12__hot_cold_t", E::Malloc, 0, -1},
    {"_ZnamRKSt9nothrow_t12__hot_cold_t", E::Malloc, 0, -1},

    // aligned new (size, align), aligned nothrow (size, align, nothrow)
    {"_ZnwmSt11align_val_t", E::MallocAligned, 0, 1},
    {"_ZnamSt11align_val_t", E::MallocAligned, 0, 1},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", E::MallocAligned, 0, 1},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", E::MallocAligned, 0, 1},
    {"_ZnwmSt11align_val_t12__hot_cold_t", E::MallocAligned, 0, 1},
    {"_ZnamSt11align_val_t12__hot_cold_t", E::MallocAligned, 0, 1},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t12__hot_cold_t", E::MallocAligned, 0, 1},
    {"_ZnamSt11align_val_tRKSt9nothrow_t12__hot_cold_t", E::MallocAligned, 0, 1},

    // operator delete / delete[] (ptr), sized (ptr, size), nothrow (ptr, nothrow)
    {"_ZdlPv", E::Free, 0, -1},
    {"_ZdaPv", E::Free, 0, -1},
    {"_ZdlPvm", E::Free, 0, -1},
    {"_ZdaPvm", E::Free, 0, -1},
    {"_ZdlPvRKSt9nothrow_t", E::Free, 0, -1},
    {"_ZdaPvRKSt9nothrow_t", E::Free, 0, -1},

    // aligned delete (ptr, align), sized aligned (ptr, size, align),
    // aligned nothrow (ptr, align, nothrow)
    {"_ZdlPvSt11align_val_t", E::FreeAligned, 0, 1},
    {"_ZdaPvSt11align_val_t", E::FreeAligned, 0, 1},
    {"_ZdlPvmSt11align_val_t", E::FreeAligned, 0, 2},
    {"_ZdaPvmSt11align_val_t", E::FreeAligned, 0, 2},
    {"_ZdlPvSt11align_val_tRKSt9nothrow_t", E::FreeAligned, 0, 1},
    {"_ZdaPvSt11align_val_tRKSt9nothrow_t", E::FreeAligned, 0, 1},
};

// CUDA's header defines __nv_aligned_device_malloc as an inline call of
// __nv_aligned_device_malloc_impl (clang does not see that header part; a
// program then declares the function itself).
constexpr const char* AlignedMallocReason =
    "its result is released with plain free(), which loses the alignment; use aligned operator new "
    "(new (std::align_val_t(N)) T) or over-allocate with malloc";
const UnsupportedSymbol Unsupported[] = {
    {"__nv_aligned_device_malloc", AlignedMallocReason},
    {"__nv_aligned_device_malloc_impl", AlignedMallocReason},
};

}  // namespace

llvm::ArrayRef<AllocationSymbol> allocationSymbols() { return Symbols; }

llvm::ArrayRef<UnsupportedSymbol> unsupportedSymbols() { return Unsupported; }

llvm::StringRef entryPointName(EntryPoint Entry) {
  namespace abi = gpualloc::abi;
  auto Ref = [](std::string_view Name) { return llvm::StringRef(Name.data(), Name.size()); };
  switch (Entry) {
    case E::Malloc: return Ref(abi::malloc_entry);
    case E::MallocSameSize: return Ref(abi::malloc_same_size_entry);
    case E::MallocLane: return Ref(abi::malloc_lane_entry);
    case E::Free: return Ref(abi::free_entry);
    case E::FreeLane: return Ref(abi::free_lane_entry);
    case E::MallocAligned: return Ref(abi::malloc_aligned_entry);
    case E::MallocAlignedLane: return Ref(abi::malloc_aligned_lane_entry);
    case E::FreeAligned: return Ref(abi::free_aligned_entry);
    case E::FreeAlignedLane: return Ref(abi::free_aligned_lane_entry);
    case E::CheckRead: return Ref(abi::check_read_entry);
  }
  return "";
}

llvm::FunctionType* entryPointType(llvm::LLVMContext& Ctx, EntryPoint Entry) {
  using namespace llvm;
  Type* Ptr = PointerType::getUnqual(Ctx);
  Type* I64 = Type::getInt64Ty(Ctx);
  Type* Void = Type::getVoidTy(Ctx);
  switch (Entry) {
    case E::Malloc:
    case E::MallocSameSize:
    case E::MallocLane: return FunctionType::get(Ptr, {I64}, false);
    case E::Free:
    case E::FreeLane: return FunctionType::get(Void, {Ptr}, false);
    case E::MallocAligned:
    case E::MallocAlignedLane: return FunctionType::get(Ptr, {I64, I64}, false);
    case E::FreeAligned:
    case E::FreeAlignedLane:
    case E::CheckRead: return FunctionType::get(Void, {Ptr, I64}, false);
  }
  llvm_unreachable("unknown entry point");
}

EntryPoint laneVariant(EntryPoint Entry) {
  switch (Entry) {
    case E::Malloc:
    case E::MallocSameSize: return E::MallocLane;
    case E::Free: return E::FreeLane;
    case E::MallocAligned: return E::MallocAlignedLane;
    case E::FreeAligned: return E::FreeAlignedLane;
    default: return Entry;
  }
}

}  // namespace gpualloc
