// Links one strategy's runtime (bitcode embedded in the plugin) into a
// device module compiled with that strategy pinned (-gpualloc-strategy).
#pragma once

#include "llvm/ADT/StringRef.h"

namespace llvm {
class Module;
}

namespace gpualloc {

// Links the runtime of `Strategy` (a registry name) into M: only what M
// needs, retargeted to M's triple, data layout and target-cpu, every runtime
// function marked with RuntimeAttr (and, with `Inline`, always_inline), all
// of it internal except abi.h's module globals (heap, ABI version, the pin
// marker). Errors are reported through the LLVMContext. Returns whether M
// changed.
bool linkRuntime(llvm::Module& M, llvm::StringRef Strategy, bool Inline);

}  // namespace gpualloc
