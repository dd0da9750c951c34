// Links gpualloc's device runtime (bitcode embedded in the plugin) into a
// device module.
#pragma once

#include "llvm/ADT/StringRef.h"

namespace llvm {
class Module;
}

namespace gpualloc {

// The runtime's global holding the heap of the current context; set by
// libgpualloc, so it stays external (and weak: -fgpu-rdc TUs share it).
inline constexpr const char* HeapGlobal = "__gpualloc_heap";
// The runtime's strategy pin: an integer global, UINT32_MAX-style "none" in
// the runtime, set to a strategy id when a strategy is pinned at compile time.
inline constexpr const char* PinGlobal = "__gpualloc_pinned_strategy";

// Links the runtime into M: only what M needs, retargeted to M's triple,
// data layout and target-cpu, everything internal except HeapGlobal and
// PinGlobal, every runtime function marked with RuntimeAttr. With a
// non-empty Strategy, the pin is set to that strategy (a registry name).
// Errors are reported through the LLVMContext; returns whether M changed.
bool linkRuntime(llvm::Module& M, llvm::StringRef Strategy);

}  // namespace gpualloc
