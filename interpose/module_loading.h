// Loading device code: an unpinned module (compiled without
// --gpualloc-strategy) carries its own PTX instead of an allocator
// (specialise/unpinned_module.h). Whenever the program hands such an image to
// the driver (cuModuleLoad*, cuLibraryLoad*), libgpualloc hands the driver
// instead that PTX joined with the runtime PTX of the strategy chosen by
// GPUALLOC_STRATEGY (specialise/join.h); the driver compiles it (JIT) for
// each device it runs on, and keeps the result in its compute cache
// (CUDA_CACHE_PATH, ~/.nv/ComputeCache), so later runs load it at once.
//
// A pinned module (compiled with --gpualloc-strategy, or holding such a part)
// is refused here unless its strategy is GPUALLOC_STRATEGY: its code would
// misread another strategy's heap. The check reads the images' symbol tables,
// so it costs the driver no failing lookups.
//
// Invariants:
//  - an image that is not an unpinned module is passed through untouched;
//  - a joined module is built once per image (keyed by its address) and
//    never freed: the driver may read it again when it loads lazily;
//  - the JIT options repeat the ptxas options of the compile (-O, maxrregcount,
//    -g, -lineinfo) unless the program passes its own.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

namespace gpualloc::interpose {

// What to load in place of an image.
struct specialised_image {
  std::string ptx;                  // the joined module (NUL-terminated as std::string)
  std::vector<CUjit_option> options;  // the compile's JIT options
  std::vector<void*> values;
};

// The specialised module for `image`, or null if it is not an unpinned module.
// `error` is set (and null returned) when it is one that cannot be
// specialised: another gpualloc version, a compressed fatbin, bad PTX.
const specialised_image* specialise(const void* image, CUresult* error);

// Loads a specialised module with the real cuModuleLoadDataEx /
// cuLibraryLoadData. The program's JIT options come first; the compile's
// are added where it sets none of the same kind.
CUresult load_module(CUmodule* module, const specialised_image& s, unsigned count, CUjit_option* options,
                     void** values);
CUresult load_library(CUlibrary* library, const specialised_image& s, CUjit_option* options, void** values,
                      unsigned count, CUlibraryOption* library_options, void** library_values, unsigned library_count);

// The contents of a file the program asks the driver to load (kept forever:
// a library may be read lazily), or null with *error set.
const std::string* read_image_file(const char* path, CUresult* error);

}  // namespace gpualloc::interpose
