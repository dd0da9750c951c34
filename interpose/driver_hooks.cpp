// How libgpualloc sees the program's driver calls.
//
// Since CUDA 11.3 libcudart reaches the driver through dlopen("libcuda.so.1"),
// dlsym("cuGetProcAddress_v2") and then cuGetProcAddress for everything else,
// so exporting cu* symbols alone catches nothing. Three doors, one table:
//
//  1. dlsym (exported here, interposing libc's): a lookup of a hooked name
//     (including cuGetProcAddress itself) that finds the driver's function
//     records it as the real one and returns our wrapper.
//  2. cuGetProcAddress / _v2: the real resolver answers with the caller's
//     version and flags; if the function it returns is one we hook (dladdr
//     names the exact variant: _v2, _ptsz...), the caller gets our wrapper for
//     that variant. Everything else (cuGetExportTable included) passes through.
//  3. The wrappers are themselves exported under the driver's ABI names, so a
//     program that links libcuda and calls the driver directly reaches them
//     (when libgpualloc comes before libcuda in the link order or is preloaded).
//
// Invariant: each hooked variant has one slot holding the real function of
// exactly that variant (set once: from dlsym/cuGetProcAddress, or resolved by
// name from libcuda on first call), and one wrapper that calls only it. A
// wrapper never stores itself or anything else of libgpualloc as a real one.
//
// The wrappers' C++ names are hook_<abi name>; an asm label gives each's
// exported alias the ABI name, so cuda.h's #defines (cuCtxDestroy ->
// cuCtxDestroy_v2) never rename them. Nothing in libgpualloc calls a cu* symbol by name.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <tuple>

#include "checked_mode.h"
#include "context_heaps.h"
#include "driver.h"
#include "gpualloc/dispatch.h"
#include "log.h"
#include "module_loading.h"
#include "module_setup.h"

#define GPUALLOC_EXPORT __attribute__((visibility("default")))

namespace gpualloc::interpose {
namespace {

// ---------------------------------------------------------------------------
// The hooked variants: X(abi name, family). A family fixes the signature
// (<family>_PARAMS / <family>_ARGS) and the behaviour (impl_<family>).
#define GPUALLOC_HOOKS(X)                                                   \
  X(cuGetProcAddress, get_proc_address_v1)                                  \
  X(cuGetProcAddress_v2, get_proc_address_v2)                               \
  X(cuLaunchKernel, launch_kernel)                                          \
  X(cuLaunchKernel_ptsz, launch_kernel)                                     \
  X(cuLaunchKernelEx, launch_kernel_ex)                                     \
  X(cuLaunchKernelEx_ptsz, launch_kernel_ex)                                \
  X(cuLaunchCooperativeKernel, launch_cooperative)                          \
  X(cuLaunchCooperativeKernel_ptsz, launch_cooperative)                     \
  X(cuGraphInstantiate, graph_instantiate_legacy)                           \
  X(cuGraphInstantiate_v2, graph_instantiate_legacy)                        \
  X(cuGraphInstantiateWithFlags, graph_instantiate_flags)                   \
  X(cuGraphInstantiateWithParams, graph_instantiate_params)                 \
  X(cuGraphInstantiateWithParams_ptsz, graph_instantiate_params)            \
  X(cuGraphExecUpdate, graph_exec_update_v1)                                \
  X(cuGraphExecUpdate_v2, graph_exec_update_v2)                             \
  X(cuGraphExecKernelNodeSetParams, graph_exec_kernel_params_v1)            \
  X(cuGraphExecKernelNodeSetParams_v2, graph_exec_kernel_params_v2)         \
  X(cuGraphExecNodeSetParams, graph_exec_node_params)                       \
  X(cuGraphExecChildGraphNodeSetParams, graph_exec_child_params)            \
  X(cuGraphAddKernelNode, graph_add_kernel_node_v1)                         \
  X(cuGraphAddKernelNode_v2, graph_add_kernel_node_v2)                      \
  X(cuGraphKernelNodeSetParams, graph_kernel_params_v1)                     \
  X(cuGraphKernelNodeSetParams_v2, graph_kernel_params_v2)                  \
  X(cuGraphAddNode, graph_add_node_v1)                                      \
  X(cuGraphAddNode_v2, graph_add_node_v2)                                   \
  X(cuGraphNodeSetParams, graph_node_params)                                \
  X(cuCtxSetLimit, ctx_set_limit)                                           \
  X(cuCtxGetLimit, ctx_get_limit)                                           \
  X(cuCtxDestroy, ctx_destroy)                                              \
  X(cuCtxDestroy_v2, ctx_destroy)                                           \
  X(cuDevicePrimaryCtxReset, primary_ctx_reset)                             \
  X(cuDevicePrimaryCtxReset_v2, primary_ctx_reset)                          \
  X(cuDevicePrimaryCtxRelease, primary_ctx_release)                         \
  X(cuDevicePrimaryCtxRelease_v2, primary_ctx_release)                      \
  X(cuModuleUnload, module_unload)                                          \
  X(cuLibraryUnload, library_unload)                                        \
  X(cuModuleLoad, module_load)                                              \
  X(cuModuleLoadData, module_load_data)                                     \
  X(cuModuleLoadDataEx, module_load_data_ex)                                \
  X(cuModuleLoadFatBinary, module_load_data)                                \
  X(cuLibraryLoadData, library_load_data)                                   \
  X(cuLibraryLoadFromFile, library_load_from_file)

enum class slot : int {
#define GPUALLOC_SLOT(name, family) slot_##name,  // prefixed: cuda.h #defines some names
  GPUALLOC_HOOKS(GPUALLOC_SLOT)
#undef GPUALLOC_SLOT
};

// The real function of a slot (resolved by name from libcuda if not yet known).
void* real_pointer(slot s);

// What the resolvers hand out instead of `p`, the driver's function named
// `symbol` (the name the caller asked for): our wrapper, or `p` itself.
void* wrap_driver_function(const char* symbol, void* p, bool from_proc_address);

// ---------------------------------------------------------------------------
// Families: parameters, arguments, behaviour.

#define get_proc_address_v1_PARAMS (const char* symbol, void** pfn, int version, cuuint64_t flags)
#define get_proc_address_v1_ARGS symbol, pfn, version, flags
#define get_proc_address_v2_PARAMS \
  (const char* symbol, void** pfn, int version, cuuint64_t flags, CUdriverProcAddressQueryResult* status)
#define get_proc_address_v2_ARGS symbol, pfn, version, flags, status

template <class Fn, class... Rest>
CUresult impl_get_proc_address_v1(Fn real, bool, const char* symbol, void** pfn, Rest... rest) {
  CUresult r = real(symbol, pfn, rest...);
  if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr && symbol != nullptr) {
    *pfn = wrap_driver_function(symbol, *pfn, true);
    if (*pfn == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  }
  return r;
}
template <class Fn, class... Rest>
CUresult impl_get_proc_address_v2(Fn real, bool ptsz, const char* symbol, void** pfn, Rest... rest) {
  return impl_get_proc_address_v1(real, ptsz, symbol, pfn, rest...);
}

#define launch_kernel_PARAMS                                                                          \
  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, \
   CUstream stream, void** params, void** extra)
#define launch_kernel_ARGS f, gx, gy, gz, bx, by, bz, shared, stream, params, extra

template <class Fn>
CUresult impl_launch_kernel(Fn real, bool ptsz, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                            unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params, void** extra) {
  launch_info info;
  if (CUresult r = prepare_launch(f, &info); r != CUDA_SUCCESS) return r;
  if (info.checked) before_launch(info, stream, ptsz);
  CUresult r = real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  if (r == CUDA_SUCCESS && info.checked) after_launch(info, stream, ptsz);
  return r;
}

#define launch_kernel_ex_PARAMS (const CUlaunchConfig* config, CUfunction f, void** params, void** extra)
#define launch_kernel_ex_ARGS config, f, params, extra

template <class Fn>
CUresult impl_launch_kernel_ex(Fn real, bool ptsz, const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  launch_info info;
  if (CUresult r = prepare_launch(f, &info); r != CUDA_SUCCESS) return r;
  CUstream stream = config != nullptr ? config->hStream : nullptr;
  if (info.checked) before_launch(info, stream, ptsz);
  CUresult r = real(config, f, params, extra);
  if (r == CUDA_SUCCESS && info.checked) after_launch(info, stream, ptsz);
  return r;
}

#define launch_cooperative_PARAMS                                                                     \
  (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shared, \
   CUstream stream, void** params)
#define launch_cooperative_ARGS f, gx, gy, gz, bx, by, bz, shared, stream, params

template <class Fn>
CUresult impl_launch_cooperative(Fn real, bool ptsz, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params) {
  launch_info info;
  if (CUresult r = prepare_launch(f, &info); r != CUDA_SUCCESS) return r;
  if (info.checked) before_launch(info, stream, ptsz);
  CUresult r = real(f, gx, gy, gz, bx, by, bz, shared, stream, params);
  if (r == CUDA_SUCCESS && info.checked) after_launch(info, stream, ptsz);
  return r;
}

// Graph calls whose second argument is the graph to prepare.
template <class Fn, class First, class... Rest>
CUresult prepare_graph_then(Fn real, First first, CUgraph graph, Rest... rest) {
  if (CUresult r = prepare_graph(graph); r != CUDA_SUCCESS) return r;
  return real(first, graph, rest...);
}

#define graph_instantiate_legacy_PARAMS \
  (CUgraphExec * exec, CUgraph graph, CUgraphNode * error_node, char* log, size_t log_size)
#define graph_instantiate_legacy_ARGS exec, graph, error_node, log, log_size
#define graph_instantiate_flags_PARAMS (CUgraphExec * exec, CUgraph graph, unsigned long long flags)
#define graph_instantiate_flags_ARGS exec, graph, flags
#define graph_instantiate_params_PARAMS \
  (CUgraphExec * exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS * instantiate_params)
#define graph_instantiate_params_ARGS exec, graph, instantiate_params
#define graph_exec_update_v1_PARAMS \
  (CUgraphExec exec, CUgraph graph, CUgraphNode * error_node, CUgraphExecUpdateResult * result)
#define graph_exec_update_v1_ARGS exec, graph, error_node, result
#define graph_exec_update_v2_PARAMS (CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo * result)
#define graph_exec_update_v2_ARGS exec, graph, result

template <class Fn, class... Args>
CUresult impl_graph_instantiate_legacy(Fn real, bool, Args... args) { return prepare_graph_then(real, args...); }
template <class Fn, class... Args>
CUresult impl_graph_instantiate_flags(Fn real, bool, Args... args) { return prepare_graph_then(real, args...); }
template <class Fn, class... Args>
CUresult impl_graph_instantiate_params(Fn real, bool, Args... args) { return prepare_graph_then(real, args...); }
template <class Fn, class... Args>
CUresult impl_graph_exec_update_v1(Fn real, bool, Args... args) { return prepare_graph_then(real, args...); }
template <class Fn, class... Args>
CUresult impl_graph_exec_update_v2(Fn real, bool, Args... args) { return prepare_graph_then(real, args...); }

// Kernel node parameters: v1 has only func (first member), v2/v3 add kern
// and ctx. *info (when not null) says whether the node is checked.
CUresult prepare_node(const CUDA_KERNEL_NODE_PARAMS_v1* p, launch_info* info = nullptr) {
  return p != nullptr ? prepare_kernel_node(p->func, nullptr, nullptr, info) : CUDA_SUCCESS;
}
CUresult prepare_node(const CUDA_KERNEL_NODE_PARAMS_v2* p, launch_info* info = nullptr) {
  return p != nullptr ? prepare_kernel_node(p->func, p->kern, p->ctx, info) : CUDA_SUCCESS;
}
CUresult prepare_node(const CUgraphNodeParams* p, launch_info* info = nullptr) {
  if (p == nullptr || p->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_SUCCESS;
  return prepare_kernel_node(p->kernel.func, p->kernel.kern, p->kernel.ctx, info);
}

#define graph_exec_kernel_params_v1_PARAMS \
  (CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* params)
#define graph_exec_kernel_params_v1_ARGS exec, node, params
#define graph_exec_kernel_params_v2_PARAMS \
  (CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* params)
#define graph_exec_kernel_params_v2_ARGS exec, node, params
#define graph_exec_node_params_PARAMS (CUgraphExec exec, CUgraphNode node, CUgraphNodeParams * params)
#define graph_exec_node_params_ARGS exec, node, params
#define graph_add_kernel_node_v1_PARAMS                                                   \
  (CUgraphNode * node, CUgraph graph, const CUgraphNode* deps, size_t ndeps, \
   const CUDA_KERNEL_NODE_PARAMS_v1* params)
#define graph_add_kernel_node_v1_ARGS node, graph, deps, ndeps, params
#define graph_add_kernel_node_v2_PARAMS                                                   \
  (CUgraphNode * node, CUgraph graph, const CUgraphNode* deps, size_t ndeps, \
   const CUDA_KERNEL_NODE_PARAMS_v2* params)
#define graph_add_kernel_node_v2_ARGS node, graph, deps, ndeps, params
#define graph_kernel_params_v1_PARAMS (CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v1* params)
#define graph_kernel_params_v1_ARGS node, params
#define graph_kernel_params_v2_PARAMS (CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS_v2* params)
#define graph_kernel_params_v2_ARGS node, params
#define graph_add_node_v1_PARAMS \
  (CUgraphNode * node, CUgraph graph, const CUgraphNode* deps, size_t ndeps, CUgraphNodeParams* params)
#define graph_add_node_v1_ARGS node, graph, deps, ndeps, params
#define graph_add_node_v2_PARAMS                                                                           \
  (CUgraphNode * node, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t ndeps, \
   CUgraphNodeParams* params)
#define graph_add_node_v2_ARGS node, graph, deps, edges, ndeps, params
#define graph_node_params_PARAMS (CUgraphNode node, CUgraphNodeParams * params)
#define graph_node_params_ARGS node, params

// Calls whose last argument describes a kernel node: prepare it first.
template <class Fn, class... Args>
CUresult prepare_node_then(Fn real, Args... args) {
  if (CUresult r = prepare_node(std::get<sizeof...(Args) - 1>(std::tie(args...))); r != CUDA_SUCCESS) return r;
  return real(args...);
}
#define GPUALLOC_NODE_FAMILY(family) \
  template <class Fn, class... Args> \
  CUresult impl_##family(Fn real, bool, Args... args) { return prepare_node_then(real, args...); }
GPUALLOC_NODE_FAMILY(graph_exec_kernel_params_v1)
GPUALLOC_NODE_FAMILY(graph_exec_kernel_params_v2)
GPUALLOC_NODE_FAMILY(graph_exec_node_params)
GPUALLOC_NODE_FAMILY(graph_kernel_params_v1)
GPUALLOC_NODE_FAMILY(graph_kernel_params_v2)
GPUALLOC_NODE_FAMILY(graph_node_params)
#undef GPUALLOC_NODE_FAMILY

// cuGraphAddKernelNode: prepared as above, and in checked mode between a
// stamp and a sweep node (checked_mode.h).
template <class Fn, class Params>
CUresult add_kernel_node_then(Fn real, CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count,
                              const Params* params) {
  launch_info info;
  if (CUresult r = prepare_node(params, &info); r != CUDA_SUCCESS) return r;
  return add_kernel_node(info, graph, deps, count, node,
                         [&](const CUgraphNode* d, size_t n) { return real(node, graph, d, n, params); });
}
template <class Fn, class... Args>
CUresult impl_graph_add_kernel_node_v1(Fn real, bool, Args... args) {
  return add_kernel_node_then(real, args...);
}
template <class Fn, class... Args>
CUresult impl_graph_add_kernel_node_v2(Fn real, bool, Args... args) {
  return add_kernel_node_then(real, args...);
}

// cuGraphAddNode: as cuGraphAddKernelNode for a kernel node, and a
// conditional node's body graphs are remembered (CUDA 13 cannot list them
// later; prepare_graph needs them).
void remember_if_conditional(CUresult r, const CUgraphNode* node, const CUgraphNodeParams* params) {
  if (r == CUDA_SUCCESS && node != nullptr && params != nullptr && params->type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
    remember_conditional_bodies(*node, params->conditional.phGraph_out, params->conditional.size);
}
template <class Fn>
CUresult impl_graph_add_node_v1(Fn real, bool, CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count,
                                CUgraphNodeParams* params) {
  launch_info info;
  if (CUresult r = prepare_node(params, &info); r != CUDA_SUCCESS) return r;
  const CUresult r = add_kernel_node(info, graph, deps, count, node,
                                     [&](const CUgraphNode* d, size_t n) { return real(node, graph, d, n, params); });
  remember_if_conditional(r, node, params);
  return r;
}
template <class Fn>
CUresult impl_graph_add_node_v2(Fn real, bool, CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                const CUgraphEdgeData* edges, size_t count, CUgraphNodeParams* params) {
  launch_info info;
  if (CUresult r = prepare_node(params, &info); r != CUDA_SUCCESS) return r;
  if (edges != nullptr) info.checked = false;  // the edges belong to its own dependencies: no stamp in between
  const CUresult r = add_kernel_node(info, graph, deps, count, node, [&](const CUgraphNode* d, size_t n) {
    return real(node, graph, d, edges, n, params);  // with the stamp in between, edges is null
  });
  remember_if_conditional(r, node, params);
  return r;
}

// A child graph swapped into an instantiated graph.
#define graph_exec_child_params_PARAMS (CUgraphExec exec, CUgraphNode node, CUgraph child)
#define graph_exec_child_params_ARGS exec, node, child
template <class Fn>
CUresult impl_graph_exec_child_params(Fn real, bool, CUgraphExec exec, CUgraphNode node, CUgraph child) {
  if (CUresult r = prepare_graph(child); r != CUDA_SUCCESS) return r;
  return real(exec, node, child);
}

// The heap limit of a strategy with an arena is ours to answer; one without
// (`cuda`) keeps CUDA's.
bool heap_limit_is_ours(CUlimit limit) {
  return limit == CU_LIMIT_MALLOC_HEAP_SIZE && manages_arena(settings().strategy) && driver().loaded;
}

// Forgets a context that is about to go away (its heap, wish, module caches).
void retire(CUcontext ctx, unsigned long long key, const heap_counters* known) {
  retire_context(key, known);
  forget_context_modules(key);
}

#define ctx_set_limit_PARAMS (CUlimit limit, size_t value)
#define ctx_set_limit_ARGS limit, value

// cudaDeviceSetLimit(cudaLimitMallocHeapSize): for our strategies, the wish
// sizes the heap when it is created, and CUDA's own heap is not reserved.
// Like CUDA, a change after the heap exists fails with CUDA_ERROR_INVALID_VALUE.
template <class Fn>
CUresult impl_ctx_set_limit(Fn real, bool, CUlimit limit, size_t value) {
  CUcontext ctx = nullptr;
  if (limit == CU_LIMIT_MALLOC_HEAP_SIZE && !manages_arena(settings().strategy) && driver().loaded) {
    // CUDA's own heap: pass through, and remember that the program chose its
    // size, so the heap is not set to gpualloc's default later.
    CUresult r = real(limit, value);
    if (r == CUDA_SUCCESS && driver().cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr) set_heap_wish(ctx, value);
    return r;
  }
  if (!heap_limit_is_ours(limit) || driver().cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr)
    return real(limit, value);
  if (heap_ref h = find_heap(ctx)) {
    if (value == h->bytes) return CUDA_SUCCESS;
    GPUALLOC_VERBOSE("cudaDeviceSetLimit(cudaLimitMallocHeapSize, %zu) after the heap of context %llu was created "
                     "(%llu bytes): refused",
                     value, h->ctx_id, static_cast<unsigned long long>(h->bytes));
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (settings().heap.is_set())
    GPUALLOC_VERBOSE("the program asks for a %zu-byte heap; GPUALLOC_HEAP_SIZE wins", value);
  else
    GPUALLOC_VERBOSE("the program asks for a %zu-byte heap", value);
  return set_heap_wish(ctx, value) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#define ctx_get_limit_PARAMS (size_t * value, CUlimit limit)
#define ctx_get_limit_ARGS value, limit

template <class Fn>
CUresult impl_ctx_get_limit(Fn real, bool, size_t* value, CUlimit limit) {
  CUcontext ctx = nullptr;
  if (value == nullptr || !heap_limit_is_ours(limit) || driver().cuCtxGetCurrent(&ctx) != CUDA_SUCCESS ||
      ctx == nullptr)
    return real(value, limit);
  *value = heap_size_for_limit(ctx);
  return CUDA_SUCCESS;
}

#define ctx_destroy_PARAMS (CUcontext ctx)
#define ctx_destroy_ARGS ctx

template <class Fn>
CUresult impl_ctx_destroy(Fn real, bool, CUcontext ctx) {
  if (driver().loaded && ctx != nullptr) retire(ctx, context_key(ctx), nullptr);
  return real(ctx);
}

// The primary context of dev if it is active (without changing its refcount).
CUcontext active_primary_context(CUdevice dev) {
  const driver_api& d = driver();
  unsigned flags = 0;
  int active = 0;
  if (!d.loaded || d.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active) return nullptr;
  CUcontext ctx = nullptr;
  if (d.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) return nullptr;
  d.cuDevicePrimaryCtxRelease_v2(dev);  // back to the count we found: it stays active
  return ctx;
}

#define primary_ctx_reset_PARAMS (CUdevice dev)
#define primary_ctx_reset_ARGS dev

template <class Fn>
CUresult impl_primary_ctx_reset(Fn real, bool, CUdevice dev) {
  if (CUcontext ctx = active_primary_context(dev)) retire(ctx, context_key(ctx), nullptr);
  return real(dev);
}

#define primary_ctx_release_PARAMS (CUdevice dev)
#define primary_ctx_release_ARGS dev

// A release destroys the primary context only when it drops the last
// reference: the counters are read before (while they still can be) and
// kept only if the context is gone after.
template <class Fn>
CUresult impl_primary_ctx_release(Fn real, bool, CUdevice dev) {
  CUcontext ctx = active_primary_context(dev);
  if (ctx == nullptr) return real(dev);
  const unsigned long long key = context_key(ctx);
  heap_ref heap = find_heap(ctx);
  heap_counters counters{};
  bool have_counters = heap != nullptr && (settings().stats || settings().check) &&
                       read_counters(*heap, &counters, true) == CUDA_SUCCESS;
  CUresult r = real(dev);
  if (r == CUDA_SUCCESS && active_primary_context(dev) != ctx) retire(ctx, key, have_counters ? &counters : nullptr);
  return r;
}

#define module_unload_PARAMS (CUmodule module)
#define module_unload_ARGS module
#define library_unload_PARAMS (CUlibrary library)
#define library_unload_ARGS library

template <class Fn, class Handle>
CUresult impl_module_unload(Fn real, bool, Handle h) {
  CUresult r = real(h);
  if (driver().loaded) forget_modules();
  return r;
}
template <class Fn, class Handle>
CUresult impl_library_unload(Fn real, bool, Handle h) {
  return impl_module_unload(real, false, h);
}

// Module and library loads: an unpinned module is loaded specialised
// (module_loading.h); everything else goes to the real function untouched.
#define module_load_PARAMS (CUmodule * module, const char* path)
#define module_load_ARGS module, path
#define module_load_data_PARAMS (CUmodule * module, const void* image)
#define module_load_data_ARGS module, image
#define module_load_data_ex_PARAMS \
  (CUmodule * module, const void* image, unsigned count, CUjit_option* options, void** values)
#define module_load_data_ex_ARGS module, image, count, options, values
#define library_load_data_PARAMS                                                                        \
  (CUlibrary * library, const void* image, CUjit_option* options, void** values, unsigned count,         \
   CUlibraryOption* library_options, void** library_values, unsigned library_count)
#define library_load_data_ARGS library, image, options, values, count, library_options, library_values, library_count
#define library_load_from_file_PARAMS                                                                   \
  (CUlibrary * library, const char* path, CUjit_option* options, void** values, unsigned count,          \
   CUlibraryOption* library_options, void** library_values, unsigned library_count)
#define library_load_from_file_ARGS library, path, options, values, count, library_options, library_values, library_count

template <class Fn>
CUresult impl_module_load_data(Fn real, bool, CUmodule* module, const void* image) {
  CUresult error;
  const specialised_image* s = specialise(image, &error);
  if (error != CUDA_SUCCESS) return error;
  return s != nullptr ? load_module(module, *s, 0, nullptr, nullptr) : real(module, image);
}

template <class Fn>
CUresult impl_module_load_data_ex(Fn real, bool, CUmodule* module, const void* image, unsigned count,
                                  CUjit_option* options, void** values) {
  CUresult error;
  const specialised_image* s = specialise(image, &error);
  if (error != CUDA_SUCCESS) return error;
  return s != nullptr ? load_module(module, *s, count, options, values) : real(module, image, count, options, values);
}

template <class Fn>
CUresult impl_module_load(Fn real, bool, CUmodule* module, const char* path) {
  CUresult error;
  const std::string* file = read_image_file(path, &error);
  const specialised_image* s = file != nullptr ? specialise(file->data(), &error) : nullptr;
  if (error != CUDA_SUCCESS && file != nullptr) return error;
  return s != nullptr ? load_module(module, *s, 0, nullptr, nullptr) : real(module, path);
}

template <class Fn>
CUresult impl_library_load_data(Fn real, bool, CUlibrary* library, const void* image, CUjit_option* options,
                                void** values, unsigned count, CUlibraryOption* library_options, void** library_values,
                                unsigned library_count) {
  CUresult error;
  const specialised_image* s = specialise(image, &error);
  if (error != CUDA_SUCCESS) return error;
  if (s != nullptr)
    return load_library(library, *s, options, values, count, library_options, library_values, library_count);
  return real(library, image, options, values, count, library_options, library_values, library_count);
}

template <class Fn>
CUresult impl_library_load_from_file(Fn real, bool, CUlibrary* library, const char* path, CUjit_option* options,
                                     void** values, unsigned count, CUlibraryOption* library_options,
                                     void** library_values, unsigned library_count) {
  CUresult error;
  const std::string* file = read_image_file(path, &error);
  const specialised_image* s = file != nullptr ? specialise(file->data(), &error) : nullptr;
  if (error != CUDA_SUCCESS && file != nullptr) return error;
  if (s != nullptr)
    return load_library(library, *s, options, values, count, library_options, library_values, library_count);
  return real(library, path, options, values, count, library_options, library_values, library_count);
}

constexpr bool is_per_thread_variant(const char* name) {
  std::size_t n = std::char_traits<char>::length(name);
  return n > 5 && std::char_traits<char>::compare(name + n - 5, "_ptsz", 5) == 0;
}

}  // namespace
}  // namespace gpualloc::interpose

// ---------------------------------------------------------------------------
// The wrappers. Each is defined as hook_<abi name>, hidden, and exported
// under the ABI name as an alias (door 3). libgpualloc takes its wrappers'
// addresses through the hidden names only: a reference to an exported name
// binds to the first definition in the process, and a tool preloaded before
// libgpualloc (Nsight Compute's injection exports cuGetProcAddress_v2) would
// have us hand out the tool's function as our wrapper, and the tool, whose
// real function is then itself, calls itself until the stack runs out.
#define GPUALLOC_DECLARE_HOOK(name, family)                   \
  extern "C" CUresult hook_##name family##_PARAMS;            \
  extern "C" GPUALLOC_EXPORT CUresult exported_##name family##_PARAMS __asm__(#name) \
      __attribute__((alias("hook_" #name)));
GPUALLOC_HOOKS(GPUALLOC_DECLARE_HOOK)
#undef GPUALLOC_DECLARE_HOOK

#define GPUALLOC_DEFINE_HOOK(name, family)                                                         \
  extern "C" CUresult hook_##name family##_PARAMS {                                                \
    using namespace gpualloc::interpose;                                                           \
    using fn = CUresult(CUDAAPI*) family##_PARAMS;                                                  \
    auto real = reinterpret_cast<fn>(real_pointer(slot::slot_##name));                                    \
    if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED;                                        \
    return impl_##family(real, is_per_thread_variant(#name), family##_ARGS);                      \
  }
GPUALLOC_HOOKS(GPUALLOC_DEFINE_HOOK)
#undef GPUALLOC_DEFINE_HOOK

namespace gpualloc::interpose {
namespace {

struct hook_entry {
  const char* name;
  void* wrapper;
  std::atomic<void*> real;
};

hook_entry hook_table[] = {
#define GPUALLOC_ENTRY(name, family) {#name, reinterpret_cast<void*>(&hook_##name), nullptr},
    GPUALLOC_HOOKS(GPUALLOC_ENTRY)
#undef GPUALLOC_ENTRY
};

hook_entry* find_entry(const char* name) {
  if (name == nullptr || name[0] != 'c' || name[1] != 'u') return nullptr;
  for (hook_entry& e : hook_table)
    if (std::strcmp(e.name, name) == 0) return &e;
  return nullptr;
}

// The link map of libgpualloc itself.
const link_map* own_map() {
  static const link_map* map = [] {
    Dl_info info;
    link_map* m = nullptr;
    dladdr1(reinterpret_cast<void*>(&find_entry), &info, reinterpret_cast<void**>(&m), RTLD_DL_LINKMAP);
    return m;
  }();
  return map;
}

const link_map* map_of(const void* p) {
  Dl_info info;
  link_map* m = nullptr;
  if (dladdr1(p, &info, reinterpret_cast<void**>(&m), RTLD_DL_LINKMAP) == 0) return nullptr;
  return m;
}

// Records `p` as the real function of `e` unless it is one of ours.
void remember_real(hook_entry& e, void* p) {
  if (p == e.wrapper || map_of(p) == own_map()) return;
  void* expected = nullptr;
  e.real.compare_exchange_strong(expected, p, std::memory_order_acq_rel);
}

void* real_pointer(slot s) {
  hook_entry& e = hook_table[static_cast<int>(s)];
  void* p = e.real.load(std::memory_order_acquire);
  if (p != nullptr) return p;
  if (void* h = libcuda_handle()) {
    if (void* found = real_dlsym(h, e.name)) remember_real(e, found);
  }
  return e.real.load(std::memory_order_acquire);
}

// The hooked variant the driver function `p` is, or null.
hook_entry* identify(const char* symbol, void* p) {
  Dl_info info;
  if (dladdr(p, &info) != 0 && info.dli_saddr == p && info.dli_sname != nullptr) {
    if (hook_entry* e = find_entry(info.dli_sname)) return e;
  }
  // dladdr may name another alias of the same code: compare with each
  // hooked variant of this symbol as libcuda exports it. libcuda is looked
  // up only then: the answers for the hundreds of symbols we do not hook
  // never reach the loader.
  const std::size_t n = std::strlen(symbol);
  void* h = nullptr;
  for (hook_entry& e : hook_table) {
    if (std::strncmp(e.name, symbol, n) != 0) continue;
    if (h == nullptr && (h = libcuda_handle()) == nullptr) return nullptr;
    if (real_dlsym(h, e.name) == p) return &e;
  }
  return nullptr;
}

bool symbol_is_hooked(const char* symbol) {
  const std::size_t n = std::strlen(symbol);
  for (hook_entry& e : hook_table)
    if (std::strncmp(e.name, symbol, n) == 0 && (e.name[n] == '\0' || e.name[n] == '_')) return true;
  return false;
}

void* wrap_driver_function(const char* symbol, void* p, bool from_proc_address) {
  if (map_of(p) == own_map()) return p;
  hook_entry* e = from_proc_address ? identify(symbol, p) : find_entry(symbol);
  if (e == nullptr) {
    if (from_proc_address && symbol_is_hooked(symbol)) {
      // A variant libgpualloc cannot wrap: kernels launched or modules loaded
      // through it would miss their heap or their specialisation and fail
      // later, far from the cause. Refuse it here instead.
      Dl_info info;
      const char* name = dladdr(p, &info) != 0 && info.dli_sname != nullptr ? info.dli_sname : "an unexported function";
      GPUALLOC_LOG("cuGetProcAddress(\"%s\") returned %s, a variant this libgpualloc cannot intercept (a newer "
                   "driver or runtime?): refused",
                   symbol, name);
      return nullptr;
    }
    return p;
  }
  remember_real(*e, p);
  return e->wrapper;
}

// dlsym(RTLD_NEXT, name) on behalf of the code at `caller`: the first object
// after the caller's in load order that defines `name` itself. (Forwarding
// RTLD_NEXT to libc's dlsym would search after libgpualloc instead.)
void* next_symbol(const void* caller, const char* name) {
  const link_map* caller_map = map_of(caller);
  if (caller_map == nullptr) return real_dlsym(RTLD_NEXT, name);
  for (link_map* m = caller_map->l_next; m != nullptr; m = m->l_next) {
    if (m->l_name == nullptr || m->l_name[0] == '\0') continue;
    // A handle of an object already loaded (dlopen sets up its search list;
    // a raw link_map of a startup dependency is not a valid handle). dlsym
    // through it also searches the object's dependencies, so keep only
    // definitions in m itself.
    void* h = real_dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (h == nullptr) continue;
    void* p = real_dlsym(h, name);
    real_dlclose(h);
    if (p != nullptr && map_of(p) == m) return p;
  }
  return nullptr;
}

// Whether the object containing `caller` (not libgpualloc) defines `name` itself.
bool defines(const void* caller, const char* name) {
  const link_map* m = map_of(caller);
  if (m == nullptr || m == own_map() || m->l_name == nullptr || m->l_name[0] == '\0') return false;
  void* h = real_dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD);
  if (h == nullptr) return false;
  void* own = real_dlsym(h, name);
  real_dlclose(h);
  return own != nullptr && map_of(own) == m;
}

}  // namespace
}  // namespace gpualloc::interpose

// ---------------------------------------------------------------------------
// dlsym: interposes libc's for the whole process.
//
// A caller that exports the driver function it looks up is a tool that
// interposes it (Nsight Compute's injection exports cuGetProcAddress_v2) and
// wants the driver's, to forward to: it gets the driver's, never our wrapper.
// Our wrapper forwards to the tool, so handed ours the two called each other
// until the stack ran out (ncu 2025.3: "error code (11)" before the first
// kernel).
extern "C" GPUALLOC_EXPORT void* dlsym(void* __restrict handle, const char* __restrict name) noexcept {
  using namespace gpualloc::interpose;
  const void* caller = __builtin_return_address(0);
  void* p = handle == RTLD_NEXT ? next_symbol(caller, name) : real_dlsym(handle, name);
  if (p == nullptr || find_entry(name) == nullptr) return p;
  if (defines(caller, name)) {
    if (map_of(p) != own_map()) return p;
    void* h = libcuda_handle();
    return h != nullptr ? real_dlsym(h, name) : nullptr;
  }
  return wrap_driver_function(name, p, false);
}
