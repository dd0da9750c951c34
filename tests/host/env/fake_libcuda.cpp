// A fake CUDA driver (libcuda.so.1) that runs on the CPU, for testing
// libgpualloc's hooks where no GPU exists (tests/host/env/hooks.test).
//
// Device memory is host memory (a CUdeviceptr is a host address), copies are
// memcpy, streams and contexts are tags, and "launching" libgpualloc's init
// kernel runs the strategy's init on the host (strategies compile for the
// host). Modules are made by the test through fake_* functions, or loaded
// from PTX (kept for the test to read: the fake compiles nothing). Only what
// libgpualloc and the test call is here; the rest returns
// CUDA_ERROR_NOT_SUPPORTED through cuGetProcAddress.
#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gpualloc/abi.h"
#include "gpualloc/dispatch.h"
#include "gpualloc/walks.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))
// Defines the driver entry point `abi` (exact ABI name, whatever cuda.h #defines).
#define FAKE(abi, params) FAKE_EXPORT CUresult fake_##abi params __asm__(#abi); CUresult fake_##abi params

namespace {

constexpr std::uint32_t function_tag = 0xF00C7104, kernel_tag = 0x6E4B1E10;
constexpr std::uint64_t total_memory = std::uint64_t{4} << 30;

struct module {
  bool has_runtime = false;
  bool is_init = false;
  std::uint64_t heap_variable = 0;  // the module's __gpualloc_heap
  std::uint32_t abi_variable = gpualloc::abi::version;  // its __gpualloc_abi
};
struct function {
  std::uint32_t tag = function_tag;
  module* mod = nullptr;
  std::string name;
  int launches = 0;
};
struct kernel {
  std::uint32_t tag = kernel_tag;
  function* fn = nullptr;  // its function in the (one) context
};
struct graph;
struct node {
  CUgraphNodeType type;
  CUDA_KERNEL_NODE_PARAMS_v2 params{};
  CUgraph child = nullptr;
  graph* owner = nullptr;  // set by the cuGraphAdd*Node entries
};
struct graph {
  std::vector<node*> nodes;
};

struct state_t {
  int context_tag = 0;
  CUcontext ctx = reinterpret_cast<CUcontext>(&context_tag);
  CUcontext current = reinterpret_cast<CUcontext>(&context_tag);
  bool primary_active = true;
  std::uint64_t allocated = 0;
  int allocations = 0;
  int init_launches = 0;
  int walk_launches = 0;
  int modules_loaded = 0;
  size_t malloc_limit = 8 << 20;
  int set_limit_calls = 0;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::string last_loaded_ptx;  // the PTX of the last program image loaded as PTX
  int program_images = 0;       // program images loaded (PTX or ELF)
  std::vector<std::pair<CUjit_option, void*>> last_jit_options;
} fake;

bool is_function(const void* h) { return h != nullptr && static_cast<const function*>(h)->tag == function_tag; }

}  // namespace

// --- The test's side door ---------------------------------------------------
FAKE_EXPORT CUfunction fake_make_function(const char* name, int has_runtime) {
  auto* m = new module{};
  m->has_runtime = has_runtime != 0;
  auto* f = new function{};
  f->mod = m;
  f->name = name;
  return reinterpret_cast<CUfunction>(f);
}
FAKE_EXPORT CUkernel fake_make_kernel(const char* name, int has_runtime) {
  auto* k = new kernel{};
  k->fn = reinterpret_cast<function*>(fake_make_function(name, has_runtime));
  return reinterpret_cast<CUkernel>(k);
}
FAKE_EXPORT std::uint64_t fake_heap_variable(void* handle) {
  function* f = is_function(handle) ? static_cast<function*>(handle) : static_cast<kernel*>(handle)->fn;
  return f->mod->heap_variable;
}
FAKE_EXPORT int fake_launches(void* handle) {
  function* f = is_function(handle) ? static_cast<function*>(handle) : static_cast<kernel*>(handle)->fn;
  return f->launches;
}
FAKE_EXPORT int fake_allocations() { return fake.allocations; }
FAKE_EXPORT int fake_init_launches() { return fake.init_launches; }
FAKE_EXPORT int fake_walk_launches() { return fake.walk_launches; }
FAKE_EXPORT size_t fake_malloc_limit() { return fake.malloc_limit; }
FAKE_EXPORT int fake_set_limit_calls() { return fake.set_limit_calls; }
FAKE_EXPORT CUgraph fake_make_graph() { return reinterpret_cast<CUgraph>(new graph{}); }
FAKE_EXPORT void fake_add_kernel_node(CUgraph g, CUfunction f, CUkernel k) {
  auto* n = new node{CU_GRAPH_NODE_TYPE_KERNEL};
  n->params.func = f;
  n->params.kern = k;
  reinterpret_cast<graph*>(g)->nodes.push_back(n);
}
FAKE_EXPORT void fake_add_child_node(CUgraph g, CUgraph child) {
  auto* n = new node{CU_GRAPH_NODE_TYPE_GRAPH};
  n->child = child;
  reinterpret_cast<graph*>(g)->nodes.push_back(n);
}
FAKE_EXPORT int fake_capture_mode() { return fake.mode; }
FAKE_EXPORT const char* fake_last_loaded_ptx() { return fake.last_loaded_ptx.c_str(); }
FAKE_EXPORT int fake_program_images() { return fake.program_images; }
FAKE_EXPORT long fake_last_jit_option(int option) {
  for (auto& [o, v] : fake.last_jit_options)
    if (o == option) return static_cast<long>(reinterpret_cast<std::uintptr_t>(v));
  return -1;
}

// --- Driver entry points ------------------------------------------------------
FAKE(cuInit, (unsigned)) { return CUDA_SUCCESS; }
FAKE(cuGetErrorName, (CUresult r, const char** name)) {
  *name = r == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}
FAKE(cuCtxGetCurrent, (CUcontext * ctx)) { *ctx = fake.current; return CUDA_SUCCESS; }
FAKE(cuCtxGetDevice, (CUdevice * dev)) { *dev = 0; return CUDA_SUCCESS; }
FAKE(cuCtxGetId, (CUcontext, unsigned long long* id)) { *id = 1; return CUDA_SUCCESS; }
FAKE(cuCtxPushCurrent_v2, (CUcontext ctx)) { fake.current = ctx; return CUDA_SUCCESS; }
FAKE(cuCtxPopCurrent_v2, (CUcontext * ctx)) { *ctx = fake.current; fake.current = fake.ctx; return CUDA_SUCCESS; }
FAKE(cuCtxSynchronize, ()) { return CUDA_SUCCESS; }
FAKE(cuCtxSetLimit, (CUlimit limit, size_t value)) {
  if (limit == CU_LIMIT_MALLOC_HEAP_SIZE) fake.malloc_limit = value, ++fake.set_limit_calls;
  return CUDA_SUCCESS;
}
FAKE(cuCtxGetLimit, (size_t * value, CUlimit limit)) {
  *value = limit == CU_LIMIT_MALLOC_HEAP_SIZE ? fake.malloc_limit : 0;
  return CUDA_SUCCESS;
}
FAKE(cuCtxDestroy_v2, (CUcontext)) { fake.current = nullptr; return CUDA_SUCCESS; }
FAKE(cuDeviceGetAttribute, (int* v, CUdevice_attribute a, CUdevice)) {
  *v = a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? 2 : 0;
  return CUDA_SUCCESS;
}
FAKE(cuDevicePrimaryCtxGetState, (CUdevice, unsigned* flags, int* active)) {
  *flags = 0;
  *active = fake.primary_active;
  return CUDA_SUCCESS;
}
FAKE(cuDevicePrimaryCtxRetain, (CUcontext * ctx, CUdevice)) { *ctx = fake.ctx; return CUDA_SUCCESS; }
FAKE(cuDevicePrimaryCtxRelease_v2, (CUdevice)) { return CUDA_SUCCESS; }
FAKE(cuDevicePrimaryCtxReset_v2, (CUdevice)) { fake.primary_active = false; return CUDA_SUCCESS; }
FAKE(cuMemGetInfo_v2, (size_t * free_bytes, size_t* total)) {
  *free_bytes = total_memory - fake.allocated;
  *total = total_memory;
  return CUDA_SUCCESS;
}
FAKE(cuMemAlloc_v2, (CUdeviceptr * p, size_t bytes)) {
  if (bytes > total_memory - fake.allocated) return CUDA_ERROR_OUT_OF_MEMORY;
  void* m = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (m == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  fake.allocated += bytes;
  ++fake.allocations;
  *p = reinterpret_cast<CUdeviceptr>(m);
  return CUDA_SUCCESS;
}
FAKE(cuMemFree_v2, (CUdeviceptr p)) { std::free(reinterpret_cast<void*>(p)); return CUDA_SUCCESS; }
FAKE(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void* src, size_t n, CUstream)) {
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return CUDA_SUCCESS;
}
FAKE(cuMemcpyDtoHAsync_v2, (void* dst, CUdeviceptr src, size_t n, CUstream)) {
  std::memcpy(dst, reinterpret_cast<void*>(src), n);
  return CUDA_SUCCESS;
}
FAKE(cuMemsetD8Async, (CUdeviceptr dst, unsigned char value, size_t n, CUstream)) {
  std::memset(reinterpret_cast<void*>(dst), value, n);
  return CUDA_SUCCESS;
}
FAKE(cuMemsetD32Async, (CUdeviceptr dst, unsigned value, size_t n, CUstream)) {
  std::fill_n(reinterpret_cast<unsigned*>(dst), n, value);
  return CUDA_SUCCESS;
}
FAKE(cuStreamCreate, (CUstream * s, unsigned flags)) {
  if (flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;  // libgpualloc never uses a blocking one
  *s = reinterpret_cast<CUstream>(new int(0));
  return CUDA_SUCCESS;
}
FAKE(cuStreamSynchronize, (CUstream)) { return CUDA_SUCCESS; }
FAKE(cuStreamDestroy_v2, (CUstream s)) { delete reinterpret_cast<int*>(s); return CUDA_SUCCESS; }
FAKE(cuStreamIsCapturing, (CUstream, CUstreamCaptureStatus* s)) { *s = CU_STREAM_CAPTURE_STATUS_NONE; return CUDA_SUCCESS; }
FAKE(cuStreamIsCapturing_ptsz, (CUstream, CUstreamCaptureStatus* s)) { *s = CU_STREAM_CAPTURE_STATUS_NONE; return CUDA_SUCCESS; }
FAKE(cuThreadExchangeStreamCaptureMode, (CUstreamCaptureMode * mode)) {
  std::swap(*mode, fake.mode);
  return CUDA_SUCCESS;
}
// Images: libgpualloc's init kernel (a fatbin), or a program's module. The
// fake cannot compile PTX: a program's PTX is kept for the test to read, and
// its module acts as one that carries the runtime.
static CUresult load(CUmodule* m, const void* image, unsigned count, CUjit_option* options, void** values) {
  const std::uint32_t fatbin_magic = 0xBA55ED50;
  std::uint32_t magic;
  std::memcpy(&magic, image, 4);
  auto* mod = new module{};
  if (magic == fatbin_magic) {
    mod->is_init = true;
  } else if (std::memcmp(image, "\x7f" "ELF", 4) == 0) {
    ++fake.program_images;  // a compiled module (without the runtime, as far as the fake knows)
  } else {
    const char* text = static_cast<const char*>(image);
    if (std::strstr(text, ".version") == nullptr) return CUDA_ERROR_INVALID_IMAGE;
    ++fake.program_images;
    fake.last_loaded_ptx = text;
    fake.last_jit_options.clear();
    for (unsigned i = 0; i < count; ++i) fake.last_jit_options.emplace_back(options[i], values[i]);
    mod->has_runtime = fake.last_loaded_ptx.find("__gpualloc_heap") != std::string::npos;
  }
  ++fake.modules_loaded;
  *m = reinterpret_cast<CUmodule>(mod);
  return CUDA_SUCCESS;
}
FAKE(cuModuleLoadData, (CUmodule * m, const void* image)) { return load(m, image, 0, nullptr, nullptr); }
FAKE(cuModuleLoadDataEx, (CUmodule * m, const void* image, unsigned count, CUjit_option* options, void** values)) {
  return load(m, image, count, options, values);
}
FAKE(cuLibraryLoadData, (CUlibrary * l, const void* image, CUjit_option* options, void** values, unsigned count,
                         CUlibraryOption*, void**, unsigned)) {
  return load(reinterpret_cast<CUmodule*>(l), image, count, options, values);
}
FAKE(cuModuleLoad, (CUmodule * m, const char* path)) {
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return CUDA_ERROR_FILE_NOT_FOUND;
  std::string bytes;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) bytes.append(buffer, n);
  std::fclose(f);
  return load(m, bytes.c_str(), 0, nullptr, nullptr);
}
FAKE(cuDeviceGetCount, (int* count)) { *count = 1; return CUDA_SUCCESS; }
FAKE(cuModuleGetFunction, (CUfunction * f, CUmodule m, const char* name)) {
  const bool ours = std::strcmp(name, "__gpualloc_init") == 0 || std::strcmp(name, "__gpualloc_walk") == 0;
  if (!ours || !reinterpret_cast<module*>(m)->is_init) return CUDA_ERROR_NOT_FOUND;
  auto* fn = new function{};
  fn->mod = reinterpret_cast<module*>(m);
  fn->name = name;
  *f = reinterpret_cast<CUfunction>(fn);
  return CUDA_SUCCESS;
}
FAKE(cuModuleGetGlobal_v2, (CUdeviceptr * p, size_t* bytes, CUmodule m, const char* name)) {
  auto* mod = reinterpret_cast<module*>(m);
  if (!mod->has_runtime) return CUDA_ERROR_NOT_FOUND;
  if (std::strcmp(name, "__gpualloc_heap") == 0) {
    *p = reinterpret_cast<CUdeviceptr>(&mod->heap_variable);
    *bytes = sizeof mod->heap_variable;
    return CUDA_SUCCESS;
  }
  if (std::strcmp(name, "__gpualloc_abi") == 0) {
    *p = reinterpret_cast<CUdeviceptr>(&mod->abi_variable);
    *bytes = sizeof mod->abi_variable;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_NOT_FOUND;
}
FAKE(cuModuleUnload, (CUmodule)) { return CUDA_SUCCESS; }
FAKE(cuFuncGetModule, (CUmodule * m, CUfunction f)) {
  if (!is_function(f)) return CUDA_ERROR_INVALID_HANDLE;  // a CUkernel
  *m = reinterpret_cast<CUmodule>(reinterpret_cast<function*>(f)->mod);
  return CUDA_SUCCESS;
}
FAKE(cuFuncGetName, (const char** name, CUfunction f)) {
  if (!is_function(f)) return CUDA_ERROR_INVALID_HANDLE;
  *name = reinterpret_cast<function*>(f)->name.c_str();
  return CUDA_SUCCESS;
}
FAKE(cuKernelGetFunction, (CUfunction * f, CUkernel k)) {
  if (is_function(k)) return CUDA_ERROR_INVALID_HANDLE;
  *f = reinterpret_cast<CUfunction>(reinterpret_cast<kernel*>(k)->fn);
  return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, void** args) {
  function* fn = is_function(f) ? reinterpret_cast<function*>(f) : reinterpret_cast<kernel*>(f)->fn;
  ++fn->launches;
  if (fn->mod->is_init && fn->name == "__gpualloc_walk") {
    // A walk of checked mode: one host thread does every thread's share.
    auto* h = *static_cast<gpualloc::heap_header**>(args[0]);
    gpualloc::checked::walk_heap(h, static_cast<gpualloc::checked::walk>(*static_cast<int*>(args[1])), 0, 1);
    ++fake.walk_launches;
  } else if (fn->mod->is_init) {
    // The init kernel: one host thread does every thread's share.
    auto* h = *static_cast<gpualloc::heap_header**>(args[0]);
    int phase = *static_cast<int*>(args[1]);
    if (h->magic != gpualloc::heap_magic) return CUDA_ERROR_ILLEGAL_ADDRESS;
    gpualloc::init_strategy(h, phase, 0, 1);
    ++fake.init_launches;
  } else if (fn->mod->has_runtime && fn->mod->heap_variable == 0) {
    std::fprintf(stderr, "fake driver: kernel %s launched before its module was set up\n", fn->name.c_str());
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  return CUDA_SUCCESS;
}
FAKE(cuLaunchKernel, (CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                      void** args, void**)) { return launch(f, args); }
FAKE(cuLaunchKernel_ptsz, (CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void** args, void**)) { return launch(f, args); }
FAKE(cuLaunchKernelEx, (const CUlaunchConfig*, CUfunction f, void** args, void**)) { return launch(f, args); }
FAKE(cuGraphGetNodes, (CUgraph g, CUgraphNode* nodes, size_t* count)) {
  auto& v = reinterpret_cast<graph*>(g)->nodes;
  if (nodes != nullptr)
    for (size_t i = 0; i < v.size() && i < *count; ++i) nodes[i] = reinterpret_cast<CUgraphNode>(v[i]);
  *count = v.size();
  return CUDA_SUCCESS;
}
FAKE(cuGraphNodeGetType, (CUgraphNode n, CUgraphNodeType* t)) { *t = reinterpret_cast<node*>(n)->type; return CUDA_SUCCESS; }
FAKE(cuGraphKernelNodeGetParams_v2, (CUgraphNode n, CUDA_KERNEL_NODE_PARAMS_v2* p)) {
  *p = reinterpret_cast<node*>(n)->params;
  return CUDA_SUCCESS;
}
FAKE(cuGraphAddKernelNode_v2,
     (CUgraphNode * out, CUgraph g, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS_v2* p)) {
  auto* n = new node{CU_GRAPH_NODE_TYPE_KERNEL, *p, nullptr, reinterpret_cast<graph*>(g)};
  n->owner->nodes.push_back(n);
  *out = reinterpret_cast<CUgraphNode>(n);
  return CUDA_SUCCESS;
}
FAKE(cuGraphAddMemsetNode,
     (CUgraphNode * out, CUgraph g, const CUgraphNode*, size_t, const CUDA_MEMSET_NODE_PARAMS*, CUcontext)) {
  auto* n = new node{CU_GRAPH_NODE_TYPE_MEMSET, {}, nullptr, reinterpret_cast<graph*>(g)};
  n->owner->nodes.push_back(n);
  *out = reinterpret_cast<CUgraphNode>(n);
  return CUDA_SUCCESS;
}
FAKE(cuGraphDestroyNode, (CUgraphNode handle)) {
  auto* n = reinterpret_cast<node*>(handle);
  if (n == nullptr || n->owner == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::erase(n->owner->nodes, n);
  delete n;
  return CUDA_SUCCESS;
}
FAKE(cuGraphChildGraphNodeGetGraph, (CUgraphNode n, CUgraph* g)) { *g = reinterpret_cast<node*>(n)->child; return CUDA_SUCCESS; }
FAKE(cuGraphInstantiateWithFlags, (CUgraphExec * e, CUgraph g, unsigned long long)) {
  // Every kernel must be set up by now.
  for (node* n : reinterpret_cast<graph*>(g)->nodes) {
    if (n->type == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraphExec ignored;
      if (CUresult r = fake_cuGraphInstantiateWithFlags(&ignored, n->child, 0)) return r;
    } else if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) {
      void* h = n->params.func != nullptr ? static_cast<void*>(n->params.func) : static_cast<void*>(n->params.kern);
      function* fn = is_function(h) ? static_cast<function*>(h) : static_cast<kernel*>(h)->fn;
      if (fn->mod->has_runtime && fn->mod->heap_variable == 0) return CUDA_ERROR_INVALID_VALUE;
    }
  }
  *e = reinterpret_cast<CUgraphExec>(g);
  return CUDA_SUCCESS;
}

// cuGetProcAddress: the _ptsz variant when asked for per-thread default
// streams, else the newest _vN, else the plain name; as the real driver does,
// cuGraphInstantiate at 12.0 and later is cuGraphInstantiateWithFlags.
struct entry {
  const char* name;
  void* fn;
};
#define FAKE_ENTRY(abi) {#abi, reinterpret_cast<void*>(&fake_##abi)}
static const entry table[] = {
    FAKE_ENTRY(cuInit), FAKE_ENTRY(cuGetErrorName), FAKE_ENTRY(cuCtxGetCurrent), FAKE_ENTRY(cuCtxGetDevice),
    FAKE_ENTRY(cuCtxGetId), FAKE_ENTRY(cuCtxPushCurrent_v2), FAKE_ENTRY(cuCtxPopCurrent_v2),
    FAKE_ENTRY(cuCtxSynchronize), FAKE_ENTRY(cuCtxSetLimit), FAKE_ENTRY(cuCtxGetLimit), FAKE_ENTRY(cuCtxDestroy_v2),
    FAKE_ENTRY(cuDeviceGetAttribute), FAKE_ENTRY(cuDevicePrimaryCtxGetState), FAKE_ENTRY(cuDevicePrimaryCtxRetain),
    FAKE_ENTRY(cuDevicePrimaryCtxRelease_v2), FAKE_ENTRY(cuDevicePrimaryCtxReset_v2), FAKE_ENTRY(cuMemGetInfo_v2),
    FAKE_ENTRY(cuMemAlloc_v2), FAKE_ENTRY(cuMemFree_v2), FAKE_ENTRY(cuMemcpyHtoDAsync_v2),
    FAKE_ENTRY(cuMemcpyDtoHAsync_v2), FAKE_ENTRY(cuMemsetD8Async), FAKE_ENTRY(cuMemsetD32Async),
    FAKE_ENTRY(cuStreamCreate), FAKE_ENTRY(cuStreamSynchronize), FAKE_ENTRY(cuStreamDestroy_v2),
    FAKE_ENTRY(cuStreamIsCapturing), FAKE_ENTRY(cuStreamIsCapturing_ptsz), FAKE_ENTRY(cuThreadExchangeStreamCaptureMode),
    FAKE_ENTRY(cuModuleLoadData), FAKE_ENTRY(cuModuleLoadDataEx), FAKE_ENTRY(cuLibraryLoadData),
    FAKE_ENTRY(cuDeviceGetCount), FAKE_ENTRY(cuModuleLoad), FAKE_ENTRY(cuModuleGetFunction), FAKE_ENTRY(cuModuleGetGlobal_v2),
    FAKE_ENTRY(cuModuleUnload), FAKE_ENTRY(cuFuncGetModule), FAKE_ENTRY(cuFuncGetName), FAKE_ENTRY(cuKernelGetFunction),
    FAKE_ENTRY(cuLaunchKernel), FAKE_ENTRY(cuLaunchKernel_ptsz), FAKE_ENTRY(cuLaunchKernelEx),
    FAKE_ENTRY(cuGraphGetNodes), FAKE_ENTRY(cuGraphNodeGetType), FAKE_ENTRY(cuGraphKernelNodeGetParams_v2),
    FAKE_ENTRY(cuGraphChildGraphNodeGetGraph), FAKE_ENTRY(cuGraphInstantiateWithFlags),
    FAKE_ENTRY(cuGraphAddKernelNode_v2), FAKE_ENTRY(cuGraphAddMemsetNode), FAKE_ENTRY(cuGraphDestroyNode),
};

static void* lookup(const std::string& name) {
  for (const entry& e : table)
    if (name == e.name) return e.fn;
  return nullptr;
}

FAKE(cuGetProcAddress_v2, (const char* symbol, void** pfn, int version, cuuint64_t flags,
                           CUdriverProcAddressQueryResult* status)) {
  std::string s = symbol;
  if (s == "cuGraphInstantiate" && version >= 12000) s = "cuGraphInstantiateWithFlags";
  void* p = nullptr;
  if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) p = lookup(s + "_ptsz");
  if (p == nullptr) p = lookup(s + "_v2");
  if (p == nullptr) p = lookup(s);
  if (s == "cuGetProcAddress") p = reinterpret_cast<void*>(&fake_cuGetProcAddress_v2);
  *pfn = p;
  if (status != nullptr) *status = p != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return p != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
