#include "device_image.h"

#include <cstring>

namespace gpualloc {
namespace {

constexpr std::uint32_t fatbin_wrapper_magic = 0x466243b1;
constexpr std::uint32_t fatbin_magic = 0xba55ed50;
constexpr std::uint16_t fatbin_kind_elf = 2;
constexpr std::uint64_t fatbin_flag_compressed = 0x2000;
constexpr std::uint32_t section_symtab = 2;

template <class T>
T read(const void* base, std::uint64_t offset) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + offset, sizeof v);
  return v;
}

bool is_elf64(const void* image) {
  const auto* b = static_cast<const unsigned char*>(image);
  return b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F' && b[4] == 2 /*64-bit*/ && b[5] == 1 /*LE*/;
}

// A fatbin: [magic u32][version u16][header size u16][entries' bytes u64], then
// entries: [kind u16][version u16][header size u32][payload bytes u64]
//          [compressed bytes u32][u32][minor u16][major u16][arch u32]
//          [name offset u32][name bytes u32][flags u64][u64][uncompressed bytes u64] payload.
void read_fatbin(const unsigned char* fatbin, image_contents& out) {
  const std::uint16_t header = read<std::uint16_t>(fatbin, 6);
  const std::uint64_t size = read<std::uint64_t>(fatbin, 8);
  std::uint64_t at = header;
  const std::uint64_t end = header + size;
  while (at + 64 <= end) {
    const std::uint16_t kind = read<std::uint16_t>(fatbin, at);
    const std::uint32_t entry_header = read<std::uint32_t>(fatbin, at + 4);
    const std::uint64_t payload = read<std::uint64_t>(fatbin, at + 8);
    const std::uint32_t arch = read<std::uint32_t>(fatbin, at + 28);
    const std::uint64_t flags = read<std::uint64_t>(fatbin, at + 40);
    if (entry_header < 64 || at + entry_header + payload > end) break;
    const unsigned char* data = fatbin + at + entry_header;
    if (kind == fatbin_kind_elf) {
      if (flags & fatbin_flag_compressed)
        out.compressed_entries = true;
      else if (payload >= 64 && is_elf64(data))
        out.elves.push_back({arch, std::string_view(reinterpret_cast<const char*>(data), payload)});
    }
    at += entry_header + payload;
  }
}

}  // namespace

std::uint64_t elf_size(const void* image) {
  if (image == nullptr || !is_elf64(image)) return 0;
  const std::uint64_t phoff = read<std::uint64_t>(image, 0x20), shoff = read<std::uint64_t>(image, 0x28);
  const std::uint16_t phentsize = read<std::uint16_t>(image, 0x36), phnum = read<std::uint16_t>(image, 0x38);
  const std::uint16_t shentsize = read<std::uint16_t>(image, 0x3a), shnum = read<std::uint16_t>(image, 0x3c);
  std::uint64_t end = 64;
  if (phoff + std::uint64_t{phentsize} * phnum > end) end = phoff + std::uint64_t{phentsize} * phnum;
  if (shoff + std::uint64_t{shentsize} * shnum > end) end = shoff + std::uint64_t{shentsize} * shnum;
  for (std::uint16_t i = 0; i < shnum && shentsize >= 64; ++i) {
    const std::uint64_t sh = shoff + std::uint64_t{i} * shentsize;
    const std::uint32_t type = read<std::uint32_t>(image, sh + 4);
    const std::uint64_t offset = read<std::uint64_t>(image, sh + 0x18), bytes = read<std::uint64_t>(image, sh + 0x20);
    if (type != 8 /*NOBITS*/ && offset + bytes > end) end = offset + bytes;
  }
  return end;
}

image_contents elf_images(const void* image) {
  image_contents out;
  if (image == nullptr) return out;
  const std::uint32_t magic = read<std::uint32_t>(image, 0);
  if (magic == fatbin_wrapper_magic) {
    const void* fatbin = read<const void*>(image, 8);
    if (fatbin != nullptr && read<std::uint32_t>(fatbin, 0) == fatbin_magic)
      read_fatbin(static_cast<const unsigned char*>(fatbin), out);
  } else if (magic == fatbin_magic) {
    read_fatbin(static_cast<const unsigned char*>(image), out);
  } else if (is_elf64(image)) {
    out.elves.push_back({0, std::string_view(static_cast<const char*>(image), elf_size(image))});
  }
  return out;
}

namespace {

// Calls visit(name, symbol entry offset) for each symbol of `elf` until it returns true.
template <class Visit>
void for_each_symbol(std::string_view elf, Visit&& visit) {
  const auto* base = elf.data();
  const std::uint64_t size = elf.size();
  if (size < 64 || !is_elf64(base)) return;
  const std::uint64_t shoff = read<std::uint64_t>(base, 0x28);
  const std::uint16_t shentsize = read<std::uint16_t>(base, 0x3a), shnum = read<std::uint16_t>(base, 0x3c);
  if (shentsize < 64 || shoff + std::uint64_t{shentsize} * shnum > size) return;
  auto section = [&](std::uint32_t i) { return shoff + std::uint64_t{i} * shentsize; };
  for (std::uint16_t s = 0; s < shnum; ++s) {
    if (read<std::uint32_t>(base, section(s) + 4) != section_symtab) continue;
    const std::uint64_t symbols = read<std::uint64_t>(base, section(s) + 0x18);
    const std::uint64_t symbols_bytes = read<std::uint64_t>(base, section(s) + 0x20);
    const std::uint32_t strtab = read<std::uint32_t>(base, section(s) + 0x28);
    if (strtab >= shnum || symbols + symbols_bytes > size) continue;
    const std::uint64_t strings = read<std::uint64_t>(base, section(strtab) + 0x18);
    const std::uint64_t strings_bytes = read<std::uint64_t>(base, section(strtab) + 0x20);
    if (strings + strings_bytes > size) continue;
    for (std::uint64_t sym = symbols; sym + 24 <= symbols + symbols_bytes; sym += 24) {
      const std::uint32_t name = read<std::uint32_t>(base, sym);
      if (name >= strings_bytes) continue;
      const char* text = base + strings + name;
      if (visit(std::string_view(text, strnlen(text, strings_bytes - name)), sym)) return;
    }
  }
}

}  // namespace

std::vector<std::string_view> elf_symbols(std::string_view elf, std::string_view prefix) {
  std::vector<std::string_view> out;
  for_each_symbol(elf, [&](std::string_view name, std::uint64_t) {
    if (name.substr(0, prefix.size()) == prefix) out.push_back(name);
    return false;
  });
  return out;
}

std::optional<std::string_view> elf_global(std::string_view elf, std::string_view symbol) {
  std::optional<std::string_view> found;
  const auto* base = elf.data();
  for_each_symbol(elf, [&](std::string_view name, std::uint64_t sym) {
    if (name != symbol) return false;
    const std::uint64_t shoff = read<std::uint64_t>(base, 0x28);
    const std::uint16_t shentsize = read<std::uint16_t>(base, 0x3a), shnum = read<std::uint16_t>(base, 0x3c);
    const std::uint16_t index = read<std::uint16_t>(base, sym + 6);
    const std::uint64_t value = read<std::uint64_t>(base, sym + 8), bytes = read<std::uint64_t>(base, sym + 16);
    if (index == 0 || index >= shnum) return true;
    const std::uint64_t header = shoff + std::uint64_t{index} * shentsize;
    const std::uint64_t address = read<std::uint64_t>(base, header + 0x10);
    const std::uint64_t offset = read<std::uint64_t>(base, header + 0x18);
    const std::uint64_t section_bytes = read<std::uint64_t>(base, header + 0x20);
    const std::uint64_t within = value >= address ? value - address : value;
    if (within + bytes <= section_bytes && offset + section_bytes <= elf.size())
      found = std::string_view(base + offset + within, bytes);
    return true;
  });
  return found;
}

}  // namespace gpualloc
