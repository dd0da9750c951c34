// A file built into a gpualloc binary at build time (cmake/Embed.cmake):
// the runtime bitcode in the pass plugin, the runtime PTX and the init
// kernels in libgpualloc.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpualloc {

struct embedded_file {
  const char* name;           // null ends a table
  const unsigned char* data;  // followed by a NUL byte
  std::uint64_t size;         // without the NUL

  std::string_view text() const { return {reinterpret_cast<const char*>(data), size}; }
};

// The entry of `table` named `name`, or null.
inline const embedded_file* find_embedded(const embedded_file* table, std::string_view name) {
  for (; table->name != nullptr; ++table)
    if (name == table->name) return table;
  return nullptr;
}

}  // namespace gpualloc
