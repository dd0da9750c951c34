// gpualloc-specialise: libgpualloc's load-time step, offline.
//
//   gpualloc-specialise --strategy NAME [--checked] [--runtime-dir DIR] [-o OUT] IMAGE
//
// IMAGE is a cubin or fatbin compiled by gpualloc-clang++ without
// --gpualloc-strategy (e.g. with --cuda-device-only -c), or the module's PTX
// itself (--cuda-device-only -S). Writes the PTX that
// libgpualloc hands the driver when the program runs with
// GPUALLOC_STRATEGY=NAME (and GPUALLOC_CHECK=1 with --checked): the
// module's own PTX joined with NAME's runtime (DIR/NAME.ptx; default: this
// build's lib/runtime). Feed it to
// `ptxas -v -arch=sm_XX` to see registers and local memory as they will be.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

#include "device_image.h"
#include "gpualloc/abi.h"
#include "join.h"
#include "unpinned_module.h"

namespace {

int usage() {
  std::fprintf(stderr, "usage: gpualloc-specialise --strategy NAME [--checked] [--runtime-dir DIR] [-o OUT] IMAGE\n");
  return 2;
}

bool slurp(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string strategy, runtime_dir = GPUALLOC_RUNTIME_DIR, output, image_path;
  bool checked = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--strategy" || a == "--runtime-dir" || a == "-o") && i + 1 < argc) {
      (a == "--strategy" ? strategy : a == "-o" ? output : runtime_dir) = argv[++i];
    } else if (a == "--checked") {
      checked = true;
    } else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] != '-' && image_path.empty()) {
      image_path = a;
    } else {
      return usage();
    }
  }
  if (strategy.empty() || image_path.empty()) return usage();

  std::string image, runtime;
  if (!slurp(image_path, image)) {
    std::fprintf(stderr, "gpualloc-specialise: cannot read %s\n", image_path.c_str());
    return 1;
  }
  if (!slurp(runtime_dir + "/" + strategy + ".ptx", runtime)) {
    std::fprintf(stderr, "gpualloc-specialise: no runtime for strategy '%s' in %s\n", strategy.c_str(),
                 runtime_dir.c_str());
    return 1;
  }
  auto join_and_write = [&](std::string_view module_ptx) {
    const gpualloc::joined_module joined = gpualloc::join(module_ptx, runtime, checked);
    if (!joined.error.empty()) {
      std::fprintf(stderr, "gpualloc-specialise: %s\n", joined.error.c_str());
      return 1;
    }
    std::ofstream file;
    if (!output.empty()) file.open(output, std::ios::binary);
    std::ostream& out = output.empty() ? std::cout : file;
    out << joined.ptx;
    return out ? 0 : 1;
  };
  // PTX text: no NUL byte, unlike a cubin's or a fatbin's header.
  if (image.find('\0') == std::string::npos) return join_and_write(image);

  image.append(64, '\0');  // the parsers may read a header's worth past a short file
  const gpualloc::image_contents contents = gpualloc::elf_images(image.data());
  for (const gpualloc::elf_image& elf : contents.elves) {
    const auto blob = gpualloc::elf_global(elf.bytes, gpualloc::abi::ptx_blob);
    if (!blob) continue;
    const auto module = gpualloc::read_blob(*blob);
    if (!module || module->abi != gpualloc::abi::version) {
      std::fprintf(stderr, "gpualloc-specialise: %s carries a module of another gpualloc version\n", image_path.c_str());
      return 1;
    }
    return join_and_write(module->ptx);
  }
  std::fprintf(stderr, "gpualloc-specialise: %s carries no unpinned module (%s)\n", image_path.c_str(),
               contents.compressed_entries ? "its ELF entries are compressed" : "compiled with --gpualloc-strategy, or without gpualloc-clang++?");
  return 1;
}
