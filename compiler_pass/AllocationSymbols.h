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

namespace gpualloc {

enum class EntryPoint {
  Malloc,         // ptr __gpualloc_malloc(i64 size)
  Free,           // void __gpualloc_free(ptr)
  MallocAligned,  // ptr __gpualloc_malloc_aligned(i64 size, i64 align)
  FreeAligned,    // void __gpualloc_free_aligned(ptr, i64 align)
};

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

// Functions that cannot be replaced; using one is a compile error.
struct UnsupportedSymbol {
  llvm::StringRef Name;
  llvm::StringRef Reason;
};
llvm::ArrayRef<UnsupportedSymbol> unsupportedSymbols();

}  // namespace gpualloc
