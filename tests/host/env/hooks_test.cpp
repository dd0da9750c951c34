// libgpualloc's driver hooks against the fake driver (fake_libcuda.cpp), as
// cudart uses them: dlopen("libcuda.so.1"), dlsym("cuGetProcAddress_v2"),
// then everything through cuGetProcAddress. Linked with libgpualloc the way
// gpualloc-clang++ links programs (--no-as-needed); never with libcuda.
//
// usage: gpualloc-hooks-test <scenario>   (see main; hooks.test runs them)
#include <cuda.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpualloc/dispatch.h"
#include "gpualloc/heap.h"
#include "gpualloc/host.h"
#include "gpualloc/registry.h"
#include "expect.h"

namespace {

void* libcuda = nullptr;
CUresult (*get_proc)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*) = nullptr;

template <class T>
T side_door(const char* name) {
  void* p = dlsym(libcuda, name);
  if (p == nullptr) {
    std::printf("FAIL: the fake driver lacks %s\n", name);
    std::exit(1);
  }
  return reinterpret_cast<T>(p);
}

template <class T>
T proc(const char* symbol, cuuint64_t flags = CU_GET_PROC_ADDRESS_DEFAULT, int version = 13000) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult status;
  CUresult r = get_proc(symbol, &p, version, flags, &status);
  if (r != CUDA_SUCCESS || p == nullptr) {
    std::printf("FAIL: cuGetProcAddress(%s) = %d\n", symbol, r);
    std::exit(1);
  }
  return reinterpret_cast<T>(p);
}

std::string library_of(void* p) {
  Dl_info info;
  if (dladdr(p, &info) == 0 || info.dli_fname == nullptr) return "?";
  std::string f = info.dli_fname;
  return f.substr(f.rfind('/') + 1);
}
std::string symbol_of(void* p) {
  Dl_info info;
  if (dladdr(p, &info) == 0 || info.dli_sname == nullptr) return "?";
  return info.dli_sname;
}

using launch_fn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                               CUstream, void**, void**);

CUresult launch(launch_fn fn, void* handle) {
  return fn(static_cast<CUfunction>(handle), 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr);
}

const gpualloc::heap_header* heap_of(void* handle) {
  return reinterpret_cast<const gpualloc::heap_header*>(side_door<std::uint64_t (*)(void*)>("fake_heap_variable")(handle));
}

// The resolvers hand out our wrappers for hooked variants, exact variant by
// exact variant, and the driver's own functions for everything else.
void resolvers() {
  CHECK(library_of(reinterpret_cast<void*>(get_proc)) == "libgpualloc.so");
  CHECK(symbol_of(reinterpret_cast<void*>(get_proc)) == "cuGetProcAddress_v2");

  void* launch_default = proc<void*>("cuLaunchKernel");
  void* launch_ptsz = proc<void*>("cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
  CHECK(library_of(launch_default) == "libgpualloc.so" && symbol_of(launch_default) == "cuLaunchKernel");
  CHECK(library_of(launch_ptsz) == "libgpualloc.so" && symbol_of(launch_ptsz) == "cuLaunchKernel_ptsz");
  void* destroy = proc<void*>("cuCtxDestroy");
  CHECK(symbol_of(destroy) == "cuCtxDestroy_v2" && library_of(destroy) == "libgpualloc.so");
  void* instantiate = proc<void*>("cuGraphInstantiate");
  CHECK(symbol_of(instantiate) == "cuGraphInstantiateWithFlags" && library_of(instantiate) == "libgpualloc.so");
  void* self = proc<void*>("cuGetProcAddress");
  CHECK(symbol_of(self) == "cuGetProcAddress_v2" && library_of(self) == "libgpualloc.so");
  // Not hooked: the driver's own.
  void* alloc = proc<void*>("cuMemAlloc");
  CHECK(library_of(alloc) == "libcuda.so.1" && symbol_of(alloc) == "cuMemAlloc_v2");
  // dlsym of a hooked name in libcuda: ours; of another: the driver's.
  CHECK(library_of(dlsym(libcuda, "cuLaunchKernel")) == "libgpualloc.so");
  CHECK(library_of(dlsym(libcuda, "cuMemAlloc_v2")) == "libcuda.so.1");
  // RTLD_NEXT still means "after the caller" (here: the program).
  CHECK(dlsym(RTLD_NEXT, "puts") == reinterpret_cast<void*>(&puts));
  CHECK(dlsym(RTLD_DEFAULT, "gpualloc_reset") != nullptr);
}

// The resolver as the global scope has it: a preloaded tool's when the tool
// exports one (Nsight Compute's injection does; preloaded_tool.test), so we
// hold the tool's as the real one and the tool forwards to the driver's.
void default_resolver() {
  auto resolve = reinterpret_cast<decltype(get_proc)>(dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
  CHECK(resolve != nullptr && library_of(reinterpret_cast<void*>(resolve)) == "libgpualloc.so");
  void* alloc = nullptr;
  CUdriverProcAddressQueryResult status;
  CHECK(resolve("cuMemAlloc", &alloc, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS);
  CHECK(alloc != nullptr && library_of(alloc) == "libcuda.so.1");
}

// Kernels set up before they run: CUfunction and CUkernel handles, modules
// with and without the runtime, one heap per context, one write per module.
void launches() {
  auto make_function = side_door<CUfunction (*)(const char*, int)>("fake_make_function");
  auto make_kernel = side_door<CUkernel (*)(const char*, int)>("fake_make_kernel");
  auto launches_of = side_door<int (*)(void*)>("fake_launches");
  auto allocations = side_door<int (*)()>("fake_allocations");
  auto init_launches = side_door<int (*)()>("fake_init_launches");
  auto capture_mode = side_door<int (*)()>("fake_capture_mode");
  auto launch_default = proc<launch_fn>("cuLaunchKernel");
  auto launch_ptsz = proc<launch_fn>("cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);

  CUfunction plain = make_function("plain_kernel", 0);
  CHECK(launch(launch_default, plain) == CUDA_SUCCESS);
  CHECK(launches_of(plain) == 1);
  CHECK(allocations() == 0);  // no runtime, no heap

  CUfunction f = make_function("allocating_kernel", 1);
  CHECK(launch(launch_default, f) == CUDA_SUCCESS);
  CHECK(launches_of(f) == 1);
  const gpualloc::heap_header* h = heap_of(f);
  CHECK(h != nullptr);
  if (h == nullptr) return;
  CHECK(h->magic == gpualloc::heap_magic);
  const char* want = std::getenv("GPUALLOC_STRATEGY");
  CHECK(gpualloc::strategy(static_cast<gpualloc::strategy_id>(h->strategy)).name == (want ? want : "cuda"));
  CHECK(std::strcmp(gpualloc_strategy_name(), want ? want : "cuda") == 0);
  auto id = static_cast<gpualloc::strategy_id>(h->strategy);
  if (id != gpualloc::strategy_id::cuda) {
    gpualloc::heap_header expected{};
    expected.flags = h->flags;
    gpualloc::lay_out_heap(&expected, reinterpret_cast<std::uintptr_t>(h), h->heap_bytes, true);
    CHECK(h->space.begin == expected.space.begin && h->space.bytes == expected.space.bytes);
    CHECK(h->checks.live == expected.checks.live && h->checks.quarantine == expected.checks.quarantine);
    CHECK(h->heap_bytes == gpualloc_heap_bytes());
    CHECK(init_launches() == gpualloc::init_phases(id));
  }
  CHECK(((h->flags & gpualloc::heap_flag_stats) != 0) == (std::getenv("GPUALLOC_STATS") != nullptr));
  CHECK(((h->flags & gpualloc::heap_flag_checked) != 0) == (std::getenv("GPUALLOC_CHECK") != nullptr));
  CHECK(capture_mode() == CU_STREAM_CAPTURE_MODE_GLOBAL);  // restored after the relaxed section
  CHECK(allocations() == 1);

  // Launched again, through the other variant and as a CUkernel of another module: same heap.
  CHECK(launch(launch_ptsz, f) == CUDA_SUCCESS);
  CHECK(launches_of(f) == 2);
  CUkernel k = make_kernel("library_kernel", 1);
  CHECK(launch(launch_default, k) == CUDA_SUCCESS);
  CHECK(heap_of(k) == h);
  CHECK(launches_of(k) == 1);
  CHECK(allocations() == 1);

  // cuLaunchKernelEx and the exported symbol (a program linked with libcuda).
  auto launch_ex = proc<CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**)>("cuLaunchKernelEx");
  CUfunction g = make_function("ex_kernel", 1);
  CUlaunchConfig config{};
  CHECK(launch_ex(&config, g, nullptr, nullptr) == CUDA_SUCCESS);
  CHECK(heap_of(g) == h);
  auto exported = reinterpret_cast<launch_fn>(dlsym(RTLD_DEFAULT, "cuLaunchKernel"));
  CUfunction e = make_function("exported_kernel", 1);
  CHECK(launch(exported, e) == CUDA_SUCCESS);
  CHECK(heap_of(e) == h);

  gpualloc_counters_t c;
  CHECK(gpualloc_counters(&c) == 0);
  CHECK(c.mallocs == 0 && c.double_frees == 0);
  CHECK(gpualloc_reset() == 0);
}

void graphs() {
  auto make_function = side_door<CUfunction (*)(const char*, int)>("fake_make_function");
  auto make_kernel = side_door<CUkernel (*)(const char*, int)>("fake_make_kernel");
  auto make_graph = side_door<CUgraph (*)()>("fake_make_graph");
  auto add_kernel = side_door<void (*)(CUgraph, CUfunction, CUkernel)>("fake_add_kernel_node");
  auto add_child = side_door<void (*)(CUgraph, CUgraph)>("fake_add_child_node");
  auto instantiate = proc<CUresult (*)(CUgraphExec*, CUgraph, unsigned long long)>("cuGraphInstantiate");

  CUgraph top = make_graph(), child = make_graph();
  CUfunction f = make_function("graph_kernel", 1);
  CUkernel k = make_kernel("child_graph_kernel", 1);
  add_kernel(top, f, nullptr);
  add_kernel(child, nullptr, k);
  add_child(top, child);
  CUgraphExec exec;
  CHECK(instantiate(&exec, top, 0) == CUDA_SUCCESS);  // the fake fails it if a kernel is not set up
  CHECK(heap_of(f) != nullptr && heap_of(f) == heap_of(k));
}

// cudaDeviceSetLimit(cudaLimitMallocHeapSize) before the first kernel sizes
// our heap (unless GPUALLOC_HEAP_SIZE is set); CUDA's own heap is not touched.
void limits() {
  auto set_limit = proc<CUresult (*)(CUlimit, size_t)>("cuCtxSetLimit");
  auto get_limit = proc<CUresult (*)(size_t*, CUlimit)>("cuCtxGetLimit");
  auto set_limit_calls = side_door<int (*)()>("fake_set_limit_calls");
  auto make_function = side_door<CUfunction (*)(const char*, int)>("fake_make_function");
  const bool cuda = std::strcmp(gpualloc_strategy_name(), "cuda") == 0;
  const size_t wish = size_t{256} << 20;

  if (!cuda) CHECK(set_limit(CU_LIMIT_MALLOC_HEAP_SIZE, SIZE_MAX) == CUDA_ERROR_INVALID_VALUE);  // no device has that
  CHECK(set_limit(CU_LIMIT_MALLOC_HEAP_SIZE, wish) == CUDA_SUCCESS);
  size_t limit = 0;
  CHECK(get_limit(&limit, CU_LIMIT_MALLOC_HEAP_SIZE) == CUDA_SUCCESS);
  std::printf("limit before the first kernel: %zu\n", limit);
  CHECK(set_limit_calls() == (cuda ? 1 : 0));

  CUfunction f = make_function("sized_kernel", 1);
  CHECK(launch(proc<launch_fn>("cuLaunchKernel"), f) == CUDA_SUCCESS);
  CHECK(get_limit(&limit, CU_LIMIT_MALLOC_HEAP_SIZE) == CUDA_SUCCESS);
  std::printf("limit after: %zu\n", limit);
  std::printf("heap bytes: %llu\n", gpualloc_heap_bytes());
  if (!cuda) {
    CHECK(heap_of(f)->heap_bytes == limit);
    CHECK(set_limit(CU_LIMIT_MALLOC_HEAP_SIZE, limit) == CUDA_SUCCESS);
    CHECK(set_limit(CU_LIMIT_MALLOC_HEAP_SIZE, limit * 2) == CUDA_ERROR_INVALID_VALUE);
  }
}

// A heap that does not fit: the launch fails with the allocation's error.
void out_of_memory() {
  auto make_function = side_door<CUfunction (*)(const char*, int)>("fake_make_function");
  CUfunction f = make_function("hungry_kernel", 1);
  CUresult r = launch(proc<launch_fn>("cuLaunchKernel"), f);
  std::printf("launch: %d\n", static_cast<int>(r));
  CHECK(r == CUDA_ERROR_OUT_OF_MEMORY);
}

// Checked mode: bad frees and overflows counted on the device are reported
// after the launch that made them, with the kernel's name.
void checked() {
  auto make_function = side_door<CUfunction (*)(const char*, int)>("fake_make_function");
  auto launch_default = proc<launch_fn>("cuLaunchKernel");
  CUfunction f = make_function("misbehaving_kernel", 1);
  CHECK(launch(launch_default, f) == CUDA_SUCCESS);
  auto* h = const_cast<gpualloc::heap_header*>(heap_of(f));
  h->counters.double_frees += 2;  // as if the kernel had freed twice (device memory is host memory here)
  h->counters.overflows += 1;     // and written past a block
  CHECK(launch(launch_default, f) == CUDA_SUCCESS);
  std::fflush(stdout);
  CHECK(launch(launch_default, f) == CUDA_SUCCESS);  // nothing new: no report
  // Each launch was stamped with the kernel's slot, named once, and swept.
  auto walk_launches = side_door<int (*)()>("fake_walk_launches");
  CHECK(walk_launches() == 3);
  CHECK(h->checks.kernel == 1);
  CHECK(std::strcmp(h->checks.kernel_names + gpualloc::kernel_name_bytes, "misbehaving_kernel") == 0);
}

// Context teardown drops the heap; the next kernel gets a fresh one.
void teardown() {
  auto make_function = side_door<CUfunction (*)(const char*, int)>("fake_make_function");
  auto allocations = side_door<int (*)()>("fake_allocations");
  auto reset = proc<CUresult (*)(CUdevice)>("cuDevicePrimaryCtxReset");
  CUfunction f = make_function("first_life", 1);
  CHECK(launch(proc<launch_fn>("cuLaunchKernel"), f) == CUDA_SUCCESS);
  CHECK(allocations() == 1);
  CHECK(reset(0) == CUDA_SUCCESS);
  CHECK(gpualloc_heap_bytes() == 0);
  CUfunction g = make_function("second_life", 1);
  CHECK(launch(proc<launch_fn>("cuLaunchKernel"), g) == CUDA_SUCCESS);
  CHECK(allocations() == 2);
}

std::string read_file(const char* path) {
  std::FILE* f = std::fopen(path, "rb");
  std::string bytes;
  if (f == nullptr) return bytes;
  char buffer[65536];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) bytes.append(buffer, n);
  std::fclose(f);
  return bytes;
}

// Loading: an unpinned module (compiled without --gpualloc-strategy) reaches
// the driver as its own PTX joined with the strategy's runtime, with the JIT
// options of its compile; a pinned one, untouched (or refused under another
// strategy). argv: the two cubins.
void loads(const char* unpinned_path, const char* pinned_path) {
  auto last_ptx = side_door<const char* (*)()>("fake_last_loaded_ptx");
  auto last_option = side_door<long (*)(int)>("fake_last_jit_option");
  auto program_images = side_door<int (*)()>("fake_program_images");
  auto load_data = proc<CUresult (*)(CUmodule*, const void*)>("cuModuleLoadData");
  auto load_file = proc<CUresult (*)(CUmodule*, const char*)>("cuModuleLoad");
  auto load_library = proc<CUresult (*)(CUlibrary*, const void*, CUjit_option*, void**, unsigned, CUlibraryOption*,
                                        void**, unsigned)>("cuLibraryLoadData");
  const std::string unpinned = read_file(unpinned_path), pinned = read_file(pinned_path);
  CHECK(!unpinned.empty() && !pinned.empty());
  const std::string strategy = gpualloc_strategy_name();

  // The runtime's definitions first, then the module without its .extern
  // declarations of the entry points.
  auto specialised = [](const std::string& ptx) {
    const std::size_t runtime = ptx.find("---- gpualloc runtime ----"), module = ptx.find("---- the module ----");
    const std::size_t definition = ptx.find(".func  (.param .b64 func_retval0) __gpualloc_malloc");
    return runtime != std::string::npos && module != std::string::npos && runtime < definition &&
           definition < module && ptx.find(".entry _Z6kernelPPvm") > module &&
           ptx.find(".extern .func  (.param .b64 func_retval0) __gpualloc_malloc") == std::string::npos;
  };

  CUmodule m = nullptr;
  CHECK(load_data(&m, unpinned.data()) == CUDA_SUCCESS);
  CHECK(specialised(last_ptx()));
  CHECK(last_option(CU_JIT_OPTIMIZATION_LEVEL) == 2);  // the compile's -O2
  std::printf("specialised for %s: %zu bytes of PTX\n", strategy.c_str(), std::strlen(last_ptx()));

  CHECK(load_file(&m, unpinned_path) == CUDA_SUCCESS);
  CHECK(specialised(last_ptx()));

  // The program's own JIT option wins over the compile's.
  CUjit_option option = CU_JIT_OPTIMIZATION_LEVEL;
  void* value = reinterpret_cast<void*>(std::uintptr_t{1});
  CUlibrary library = nullptr;
  CHECK(load_library(&library, unpinned.data(), &option, &value, 1, nullptr, nullptr, 0) == CUDA_SUCCESS);
  CHECK(specialised(last_ptx()));
  CHECK(last_option(CU_JIT_OPTIMIZATION_LEVEL) == 1);

  // A module pinned to atomic carries its runtime: the driver gets the image
  // itself, under atomic; under another strategy the load is refused.
  const int before = program_images();
  const std::string previous = last_ptx();
  if (strategy == "atomic") {
    CHECK(load_data(&m, pinned.data()) == CUDA_SUCCESS);
    CHECK(program_images() == before + 1 && previous == last_ptx());
  } else {
    CHECK(load_data(&m, pinned.data()) == CUDA_ERROR_NOT_SUPPORTED);
    CHECK(program_images() == before);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "default-resolver") {  // first: the only lookup of the resolver in the process
    default_resolver();
    std::printf("%s: %s\n", scenario.c_str(), failures == 0 ? "passed" : "FAILED");
    return failures == 0 ? 0 : 1;
  }
  libcuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (libcuda == nullptr) {
    std::printf("FAIL: %s\n", dlerror());
    return 1;
  }
  get_proc = reinterpret_cast<decltype(get_proc)>(dlsym(libcuda, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    std::printf("FAIL: no cuGetProcAddress_v2\n");
    return 1;
  }

  if (scenario == "resolvers") resolvers();
  else if (scenario == "launches") launches();
  else if (scenario == "graphs") graphs();
  else if (scenario == "limits") limits();
  else if (scenario == "out-of-memory") out_of_memory();
  else if (scenario == "checked") checked();
  else if (scenario == "teardown") teardown();
  else if (scenario == "loads" && argc == 4) loads(argv[2], argv[3]);
  else {
    std::printf("usage: gpualloc-hooks-test resolvers|default-resolver|launches|graphs|limits|out-of-memory|checked|teardown\n"
                "       gpualloc-hooks-test loads UNPINNED.cubin PINNED.cubin\n");
    return 2;
  }
  std::printf("%s: %s\n", scenario.c_str(), failures == 0 ? "passed" : "FAILED");
  std::fflush(stdout);
  return failures == 0 ? 0 : 1;
}
