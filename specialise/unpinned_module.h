// An unpinned module: user PTX whose allocation calls go to the runtime's
// entry points (abi.h), left unresolved because the strategy is chosen at
// run time. gpualloc-ptxas (tools/gpualloc-ptxas.cpp) makes such a module
// loadable and carries its PTX to libgpualloc:
//
//   carry(ptx)    = ptx, with each entry point's .extern declaration replaced
//                   by a weak stub that prints "not specialised" and traps,
//                   plus the global abi::ptx_blob holding the blob below;
//   blob          = "// gpualloc unpinned module: abi=N opt=N maxrreg=N debug=N lineinfo=N\n" + ptx
//
// libgpualloc reads the blob from the compiled module (device_image.h) and
// joins its PTX with the runtime PTX of the chosen strategy (join.h); the
// JIT options of the header line reproduce the ptxas options of the compile.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpualloc {

// The ptxas options an unpinned module was compiled with.
struct jit_settings {
  int optimization = 3;   // ptxas -O
  int max_registers = 0;  // -maxrregcount, 0: none
  bool debug = false;     // -g / --device-debug
  bool line_info = false; // -lineinfo
};

struct unpinned_module {
  std::uint32_t abi = 0;
  jit_settings settings;
  std::string_view ptx;  // points into the blob
};

// Whether `ptx` declares one of the runtime's entry points as external.
bool calls_runtime_entry_points(std::string_view ptx);

// carry(ptx) above, for a module compiled with `settings`.
std::string carry(std::string_view ptx, const jit_settings& settings);

// The blob's parts, or nothing if `blob` is not one.
std::optional<unpinned_module> read_blob(std::string_view blob);

}  // namespace gpualloc
