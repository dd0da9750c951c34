// The device allocation functions gpualloc replaces, and what replaces them.
//
// Every global allocation function a CUDA program can call on the device, by
// its Itanium mangled name: C's malloc/free and each operator new/delete form
// of C++17 (plain, array, sized, nothrow, std::align_val_t) plus the
// __hot_cold_t forms LLVM's memory profiler may create. Each maps to one of the
// four runtime entry points; the table says where the size, pointer and
// alignment are among the original arguments.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

namespace llvm {
class FunctionType;
class LLVMContext;
}  // namespace llvm

namespace gpualloc {

// The runtime's entry points (names in gpualloc/abi.h). The rewrite emits
// the four general ones; entry selection (SelectEntries.h) then picks the
// same-size or per-lane variant where it applies; CheckReads.h emits the
// read check.
enum class EntryPoint {
  Malloc,             // ptr (i64 size): lanes may ask for different sizes
  MallocSameSize,     // ptr (i64 size): the size is warp-uniform
  MallocLane,         // ptr (i64 size): no coalescing
  Free,               // void (ptr)
  FreeLane,           // void (ptr): no coalescing
  MallocAligned,      // ptr (i64 size, i64 align)
  MallocAlignedLane,  // ptr (i64 size, i64 align): no coalescing
  FreeAligned,        // void (ptr, i64 align)
  FreeAlignedLane,    // void (ptr, i64 align): no coalescing
  CheckRead,          // void (ptr, i64 size): a load saw checked mode's poison (CheckReads.h)
};

inline constexpr EntryPoint AllEntryPoints[] = {
    EntryPoint::Malloc,        EntryPoint::MallocSameSize,    EntryPoint::MallocLane,
    EntryPoint::Free,          EntryPoint::FreeLane,          EntryPoint::MallocAligned,
    EntryPoint::MallocAlignedLane, EntryPoint::FreeAligned,   EntryPoint::FreeAlignedLane,
    EntryPoint::CheckRead};

struct AllocationSymbol {
  llvm::StringRef Name;  // mangled name of the function being replaced
  EntryPoint Entry;      // what replaces it
  unsigned ValueArg;     // index of the size (allocation) or pointer (deallocation)
  int AlignArg;          // index of the std::align_val_t argument, or -1
};

// All replaced symbols.
llvm::ArrayRef<AllocationSymbol> allocationSymbols();

// Name of the runtime function implementing an entry point.
llvm::StringRef entryPointName(EntryPoint E);

// The signature of an entry point.
llvm::FunctionType* entryPointType(llvm::LLVMContext& Ctx, EntryPoint E);

// The variant of a general entry point without coalescing (itself if none).
EntryPoint laneVariant(EntryPoint E);

// Functions that cannot be replaced; using one is a compile error.
struct UnsupportedSymbol {
  llvm::StringRef Name;
  llvm::StringRef Reason;
};
llvm::ArrayRef<UnsupportedSymbol> unsupportedSymbols();

}  // namespace gpualloc
