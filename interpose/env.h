// The environment of libgpualloc: GPUALLOC_* variables, parsed once at load.
//
// Everything here is pure (no CUDA, no globals, no exit): the host unit tests
// in tests/host/env call these functions directly. library.cpp reads the
// process environment through load_config() and exits on an error.
//
//   GPUALLOC_STRATEGY   a name from the registry (default: gpualloc::default_strategy)
//   GPUALLOC_HEAP_SIZE  512M, 8G, 1.5G, 4096 (bytes), 64KiB, 25% (of the device's free memory)
//   GPUALLOC_STATS      1: count allocations, print a table per context and the blocks still live at exit
//   GPUALLOC_CHECK      1: checked mode (bad frees, overflows, uses after free, leaks reported; README)
//   GPUALLOC_VERBOSE    1: log heap creation and module setup to stderr
//   GPUALLOC_COALESCE   0: every lane calls the strategy alone (default 1: the
//                       lanes of a warp that allocate together are served together)
//   GPUALLOC_RW_UNIT    the random walk's unit in bytes (rw, rw-bm, corw, crw):
//                       a power of two from 64 to 4096 (default 256)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gpualloc/registry.h"

namespace gpualloc::env {

// A heap size as the user wrote it: absolute bytes or a percentage of the
// device's free memory at heap creation.
struct heap_size {
  enum class kind { unset, bytes, percent };
  kind how = kind::unset;
  std::uint64_t bytes = 0;  // kind::bytes
  double percent = 0;       // kind::percent, in (0, 100]

  bool is_set() const { return how != kind::unset; }
  // Bytes this size means on a device with `free_bytes` free.
  std::uint64_t resolve(std::uint64_t free_bytes) const;
};

// Result of a parse: `error` is empty on success.
template <class T>
struct parsed {
  T value{};
  std::string error;
  bool ok() const { return error.empty(); }
};

// No device has this much memory: a larger size is a mistake (and rounding
// it to whole pages could wrap).
inline constexpr std::uint64_t largest_heap_bytes = std::uint64_t{1} << 56;

// "512M", "8G", "1.5G", "4096", "64KiB", "2 MB", "25%". Suffixes K, M, G, T are
// binary (1024-based), case-insensitive, optionally followed by "B" or "iB".
// Zero, negative, malformed and overflowing sizes are errors.
parsed<heap_size> parse_heap_size(std::string_view text);

// A strategy name from the registry. Unknown: an error listing the valid names.
parsed<strategy_id> parse_strategy(std::string_view name);

// On/off switches: unset, "", "0", "no", "off", "false" are off; "1", "yes",
// "on", "true" are on; anything else is an error.
parsed<bool> parse_switch(std::string_view name, const char* value);

// GPUALLOC_RW_UNIT: bytes, a power of two from 64 to 4096.
parsed<std::uint32_t> parse_rw_unit(const char* value);

// "cuda, atomic, ..." from the registry.
std::string valid_strategy_names();

// The default heap when neither GPUALLOC_HEAP_SIZE nor the program's
// cudaDeviceSetLimit(cudaLimitMallocHeapSize) gives a size: 1/8 of the
// device's free memory, at least 64 MiB.
inline constexpr std::uint64_t default_heap_minimum = std::uint64_t{64} << 20;
std::uint64_t default_heap_bytes(std::uint64_t free_bytes);

// "512 MiB", "1.50 GiB", "4096 B": for messages.
std::string format_bytes(std::uint64_t bytes);

struct config {
  strategy_id strategy = default_strategy;
  heap_size heap;  // unset: the program's wish or default_heap_bytes
  bool stats = false;
  bool check = false;
  bool verbose = false;
  bool coalesce = true;
  std::uint32_t rw_unit_bytes = 0;  // 0: the random walk's default
};

// Reads every GPUALLOC_* variable through `get` (getenv, or a table in tests).
// On error the message is complete and starts with "gpualloc: ".
using getenv_fn = const char* (*)(const char* name, void* user);
parsed<config> load_config(getenv_fn get, void* user);

}  // namespace gpualloc::env
