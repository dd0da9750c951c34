// Load-time specialisation of unpinned modules (see module_loading.h).
#include "module_loading.h"

#include <pthread.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include "device_image.h"
#include "driver.h"
#include "embedded_file.h"
#include "gpualloc/abi.h"
#include "join.h"
#include "log.h"
#include "ptx_text.h"
#include "unpinned_module.h"

// Every strategy's runtime PTX (lib/runtime/<name>.ptx), embedded by cmake/Embed.cmake.
extern "C" const gpualloc::embedded_file gpualloc_runtime_ptx[];

namespace gpualloc::interpose {
namespace {

struct cache {
  std::mutex lock;
  // Keyed by the image's address; null for an image that is not ours.
  std::unordered_map<const void*, std::unique_ptr<specialised_image>> images;
  std::vector<std::unique_ptr<std::string>> files;
};

cache* current_cache = nullptr;

// Never destroyed: the driver may read images during exit. A forked child
// starts a new one (its lock may have been held by a thread that is gone).
cache& state() {
  static std::once_flag once;
  std::call_once(once, [] {
    current_cache = new cache();
    pthread_atfork(nullptr, nullptr, [] { current_cache = new cache(); });
  });
  return *current_cache;
}

// The lowest compute capability (major * 10 + minor) among the devices, or 0.
std::uint32_t lowest_device_arch() {
  const driver_api& d = driver();
  int count = 0;
  if (!d.loaded || d.cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  std::uint32_t lowest = 0;
  for (int i = 0; i < count; ++i) {
    int major = 0, minor = 0;
    if (d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, i) != CUDA_SUCCESS ||
        d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, i) != CUDA_SUCCESS)
      continue;
    const std::uint32_t arch = static_cast<std::uint32_t>(major * 10 + minor);
    if (lowest == 0 || arch < lowest) lowest = arch;
  }
  return lowest;
}

// The unpinned module an image carries: of its ELF entries that carry one,
// the one for the newest architecture every device has (its PTX then JITs
// for all of them), else the oldest.
std::optional<unpinned_module> carried_module(const image_contents& contents) {
  const std::uint32_t devices = lowest_device_arch();
  std::optional<unpinned_module> newest_fitting, oldest;
  std::uint32_t newest_arch = 0, oldest_arch = 0;
  for (const elf_image& elf : contents.elves) {
    const auto blob = elf_global(elf.bytes, abi::ptx_blob);
    const auto module = blob ? read_blob(*blob) : std::nullopt;
    if (!module) continue;
    if ((devices == 0 || elf.arch <= devices) && (!newest_fitting || elf.arch > newest_arch))
      newest_fitting = module, newest_arch = elf.arch;
    if (!oldest || elf.arch < oldest_arch) oldest = module, oldest_arch = elf.arch;
  }
  return newest_fitting ? newest_fitting : oldest;
}

void add_jit_options(specialised_image& s, const jit_settings& j) {
  auto add = [&](CUjit_option o, std::uintptr_t v) {
    s.options.push_back(o);
    s.values.push_back(reinterpret_cast<void*>(v));
  };
  add(CU_JIT_OPTIMIZATION_LEVEL, static_cast<std::uintptr_t>(j.optimization < 0 ? 3 : j.optimization > 4 ? 4 : j.optimization));
  if (j.max_registers > 0) add(CU_JIT_MAX_REGISTERS, static_cast<std::uintptr_t>(j.max_registers));
  if (j.debug) add(CU_JIT_GENERATE_DEBUG_INFO, 1);
  if (j.line_info) add(CU_JIT_GENERATE_LINE_INFO, 1);
}

// The pin markers (abi.h) of the image's ELF entries and of the PTX it
// carries: the strategies its pinned parts were compiled for.
std::set<std::string> pins_of(const image_contents& contents, const std::optional<unpinned_module>& module) {
  std::set<std::string> pins;
  for (const elf_image& elf : contents.elves)
    for (std::string_view name : elf_symbols(elf.bytes, abi::pin_prefix)) pins.emplace(name);
  if (module)
    for (const ptx::statement& st : ptx::split(module->ptx))
      if (st.name.substr(0, abi::pin_prefix.size()) == abi::pin_prefix) pins.emplace(st.name);
  return pins;
}

// A module compiled with gpualloc-clang++ --gpualloc-strategy=NAME (or,
// under -fgpu-rdc, holding such a part) runs only with GPUALLOC_STRATEGY=NAME:
// its inlined allocator would misread another strategy's heap.
bool pins_match(const void* image, const std::set<std::string>& pins) {
  const std::string_view running = strategy(settings().strategy).name;
  const std::string wanted = abi::pin_symbol(running);
  if (pins.empty() || (pins.size() == 1 && *pins.begin() == wanted)) return true;
  std::string names;
  for (const std::string& pin : pins) {
    std::string name = pin.substr(abi::pin_prefix.size());
    for (const strategy_info& s : strategy_table)
      if (abi::pin_symbol(s.name) == pin) name = std::string(s.name);
    names += (names.empty() ? "'" : ", '") + name + "'";
  }
  GPUALLOC_LOG("module %p was compiled for strategy %s (gpualloc-clang++ --gpualloc-strategy) but this program runs "
               "strategy '%.*s' (GPUALLOC_STRATEGY): not loaded",
               image, names.c_str(), int(running.size()), running.data());
  return false;
}

std::unique_ptr<specialised_image> build(const void* image, CUresult* error) {
  const image_contents contents = elf_images(image);
  std::optional<unpinned_module> module = carried_module(contents);
  if (!pins_match(image, pins_of(contents, module))) {
    *error = CUDA_ERROR_NOT_SUPPORTED;
    return nullptr;
  }
  if (!module) {
    if (contents.compressed_entries)
      GPUALLOC_VERBOSE("image %p has compressed entries; if it was built by gpualloc-clang++ without "
                       "--gpualloc-strategy it cannot be specialised",
                       image);
    return nullptr;
  }
  const std::string_view name = strategy(settings().strategy).name;
  if (module->abi != abi::version) {
    GPUALLOC_LOG("image %p was compiled by a gpualloc of another version (ABI %u, this libgpualloc speaks %u): "
                 "rebuild it with this gpualloc-clang++",
                 image, module->abi, abi::version);
    *error = CUDA_ERROR_INVALID_IMAGE;
    return nullptr;
  }
  const embedded_file* runtime = find_embedded(gpualloc_runtime_ptx, name);
  if (runtime == nullptr) {
    GPUALLOC_LOG("no runtime for strategy %.*s in this libgpualloc", int(name.size()), name.data());
    *error = CUDA_ERROR_INVALID_IMAGE;
    return nullptr;
  }
  const auto started = std::chrono::steady_clock::now();
  joined_module joined = join(module->ptx, runtime->text(), settings().check);
  if (!joined.error.empty()) {
    GPUALLOC_LOG("cannot specialise image %p for strategy %.*s: %s", image, int(name.size()), name.data(),
                 joined.error.c_str());
    *error = CUDA_ERROR_INVALID_IMAGE;
    return nullptr;
  }
  auto s = std::make_unique<specialised_image>();
  s->ptx = std::move(joined.ptx);
  add_jit_options(*s, module->settings);
  GPUALLOC_VERBOSE("image %p specialised for strategy %.*s: %zu KiB of PTX (the module's %zu KiB), %.2f ms", image,
                   int(name.size()), name.data(), s->ptx.size() >> 10, module->ptx.size() >> 10,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  return s;
}

// The program's options, then ours of kinds it did not set.
void merge_options(const specialised_image& s, unsigned count, const CUjit_option* options, void* const* values,
                   std::vector<CUjit_option>& out_options, std::vector<void*>& out_values) {
  out_options.assign(options, options + (options != nullptr ? count : 0));
  out_values.assign(values, values + (values != nullptr ? count : 0));
  for (std::size_t i = 0; i < s.options.size(); ++i) {
    bool set = false;
    for (CUjit_option o : out_options) set |= o == s.options[i];
    if (set) continue;
    out_options.push_back(s.options[i]);
    out_values.push_back(s.values[i]);
  }
}

}  // namespace

const specialised_image* specialise(const void* image, CUresult* error) {
  *error = CUDA_SUCCESS;
  if (image == nullptr) return nullptr;
  cache& c = state();
  std::lock_guard<std::mutex> lock(c.lock);
  auto it = c.images.find(image);
  if (it != c.images.end()) return it->second.get();
  std::unique_ptr<specialised_image> s = build(image, error);
  if (*error != CUDA_SUCCESS) return nullptr;  // not cached: the message repeats on each try
  return c.images.emplace(image, std::move(s)).first->second.get();
}

CUresult load_module(CUmodule* module, const specialised_image& s, unsigned count, CUjit_option* options,
                     void** values) {
  std::vector<CUjit_option> o;
  std::vector<void*> v;
  merge_options(s, count, options, values, o, v);
  return driver().cuModuleLoadDataEx(module, s.ptx.c_str(), static_cast<unsigned>(o.size()), o.data(), v.data());
}

CUresult load_library(CUlibrary* library, const specialised_image& s, CUjit_option* options, void** values,
                      unsigned count, CUlibraryOption* library_options, void** library_values, unsigned library_count) {
  std::vector<CUjit_option> o;
  std::vector<void*> v;
  merge_options(s, count, options, values, o, v);
  return driver().cuLibraryLoadData(library, s.ptx.c_str(), o.data(), v.data(), static_cast<unsigned>(o.size()),
                                    library_options, library_values, library_count);
}

const std::string* read_image_file(const char* path, CUresult* error) {
  *error = CUDA_SUCCESS;
  std::ifstream in(path, std::ios::binary);
  if (path == nullptr || !in) {
    *error = CUDA_ERROR_FILE_NOT_FOUND;
    return nullptr;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto file = std::make_unique<std::string>(text.str());
  file->append(64, '\0');  // a NUL-terminated PTX file, and room for the parsers' header reads
  cache& c = state();
  std::lock_guard<std::mutex> lock(c.lock);
  c.files.push_back(std::move(file));
  return c.files.back().get();
}

}  // namespace gpualloc::interpose
