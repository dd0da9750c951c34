// Joins an unpinned user module's PTX with one strategy's runtime PTX
// (lib/runtime/<name>.ptx) into one module for the driver's JIT, which then
// compiles the allocator into the user's kernels as a whole program, as if
// it had been compiled for that strategy alone.
//
//   header    the user's (.version raised to the runtime's if lower; the
//             user's .target and .address_size)
//   runtime   its statements, without its header; for an unchecked heap,
//             the functions only a checked heap reaches
//             (abi::checked_only_namespace) with a trap for a body; for a
//             .target of sm_90 or later, its fences one-way (abi.h)
//   user      its statements, without its .extern declarations of the entry
//             points (the runtime above defines them) and without its weak
//             definitions the runtime has too (the heap and ABI globals of a
//             pinned translation unit linked in under -fgpu-rdc: one copy,
//             declared before any use); in its functions, the calls of the
//             entry points inlined (inline_entries.h)
//
// Names cannot collide otherwise: everything private to the runtime carries
// abi::runtime_private_prefix (compiler_pass/PrepareRuntime.h), and
// duplicated .extern declarations (vprintf) are legal PTX.
#pragma once

#include <string>
#include <string_view>

namespace gpualloc {

struct joined_module {
  std::string ptx;    // the joined module; empty on error
  std::string error;  // what is wrong with the inputs
};

// `checked_heap`: the module will run on checked heaps (GPUALLOC_CHECK=1).
joined_module join(std::string_view user_ptx, std::string_view runtime_ptx, bool checked_heap);

}  // namespace gpualloc
