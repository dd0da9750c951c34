// The device code images a program hands the CUDA driver (cuModuleLoadData,
// cuLibraryLoadData, ...): a fatbin (or clang's/nvcc's wrapper around one),
// a cubin (ELF), or PTX text; and the unpinned-module blob an ELF may carry
// (abi::ptx_blob, see unpinned_module.h).
//
// Only what gpualloc needs is parsed, with every offset checked against the
// image's size: an image that is not what its magic number says is simply
// "not ours", and left to the driver.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace gpualloc {

struct elf_image {
  std::uint32_t arch = 0;  // the fatbin entry's sm (90 for sm_90); 0 for a bare ELF
  std::string_view bytes;
};

struct image_contents {
  std::vector<elf_image> elves;  // uncompressed ELF entries
  bool compressed_entries = false;  // some entries were compressed (not readable here)
};

// The ELF images in `image` (a fatbin wrapper, fatbin or ELF), or none.
image_contents elf_images(const void* image);

// The bytes of the global `symbol` defined in `elf`, if it has one.
std::optional<std::string_view> elf_global(std::string_view elf, std::string_view symbol);

// The names of the symbols of `elf` that start with `prefix`.
std::vector<std::string_view> elf_symbols(std::string_view elf, std::string_view prefix);

// The size of an ELF image from its headers (the end of its last section or
// header table), or 0 if `image` is not a 64-bit little-endian ELF.
std::uint64_t elf_size(const void* image);

}  // namespace gpualloc
