// Launch preparation and the module caches (see module_setup.h).
#include "module_setup.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "driver.h"
#include "gpualloc/abi.h"
#include "log.h"

namespace gpualloc::interpose {
namespace {

struct pair_hash {
  template <class A, class B>
  std::size_t operator()(const std::pair<A, B>& p) const {
    auto a = reinterpret_cast<std::uintptr_t>(p.first), b = reinterpret_cast<std::uintptr_t>(p.second);
    return std::hash<std::uintptr_t>()(a * 0x9e3779b97f4a7c15ull ^ b);
  }
};

struct function_entry {
  bool has_runtime = false;
  CUfunction function = nullptr;  // the CUfunction in this context
};

// Guarded by state_lock(). Never destroyed (hooks may run during exit).
struct caches {
  std::unordered_map<std::pair<CUcontext, void*>, function_entry, pair_hash> functions;
  std::unordered_set<std::pair<CUcontext, CUmodule>, pair_hash> modules_ready;
};

caches& cache() {
  static caches* c = new caches();
  return *c;
}

// Points the module's heap variable at the heap. ctx current.
CUresult write_heap_pointer(context_heap& heap, CUdeviceptr variable) {
  const driver_api& d = driver();
  relaxed_capture_scope relaxed;
  CUdeviceptr value = heap.header;
  CUresult r = d.cuMemcpyHtoDAsync_v2(variable, &value, sizeof value, heap.stream);
  if (r == CUDA_SUCCESS) r = d.cuStreamSynchronize(heap.stream);
  return r;
}

std::string name_of(CUfunction function) {
  const char* name = nullptr;
  if (driver().cuFuncGetName(&name, function) != CUDA_SUCCESS || name == nullptr) return "?";
  return name;
}

// Reads the u32 module global `name` of a module that has it, or returns false.
bool read_u32(const context_heap& heap, CUmodule module, const std::string& name, std::uint32_t* value,
              CUresult* error) {
  const driver_api& d = driver();
  CUdeviceptr variable = 0;
  size_t bytes = 0;
  if (d.cuModuleGetGlobal_v2(&variable, &bytes, module, name.c_str()) != CUDA_SUCCESS || bytes != sizeof *value)
    return false;
  relaxed_capture_scope relaxed;
  *error = d.cuMemcpyDtoHAsync_v2(value, variable, sizeof *value, heap.stream);
  if (*error == CUDA_SUCCESS) *error = d.cuStreamSynchronize(heap.stream);
  return true;
}

// A module's runtime code must speak this libgpualloc's ABI. (Whether a
// pinned module matches the strategy was checked when it was loaded,
// module_loading.h.)
CUresult check_abi(const context_heap& heap, CUmodule module, CUfunction function) {
  CUresult r = CUDA_SUCCESS;
  std::uint32_t abi_version = 0;
  if (!read_u32(heap, module, std::string(abi::abi_variable), &abi_version, &r)) abi_version = 1;  // before the marker
  if (r != CUDA_SUCCESS) return r;
  if (abi_version == abi::version) return CUDA_SUCCESS;
  GPUALLOC_LOG("kernel %s was compiled by a gpualloc of another version (ABI %u, this libgpualloc speaks %u): "
               "rebuild it with this gpualloc-clang++; not launched",
               name_of(function).c_str(), abi_version, abi::version);
  return CUDA_ERROR_NOT_SUPPORTED;
}

// The slow path: first launch of `handle` in ctx (current). state_lock() held.
CUresult prepare_slow(CUcontext ctx, void* handle, function_entry* out) {
  const driver_api& d = driver();
  CUfunction function = static_cast<CUfunction>(handle);
  CUmodule module = nullptr;
  CUresult r = d.cuFuncGetModule(&module, function);
  if (r != CUDA_SUCCESS) {
    // A CUkernel (cudart 12+ launches these): its function in this context.
    CUfunction resolved = nullptr;
    if (d.cuKernelGetFunction(&resolved, static_cast<CUkernel>(handle)) == CUDA_SUCCESS &&
        d.cuFuncGetModule(&module, resolved) == CUDA_SUCCESS) {
      function = resolved;
      r = CUDA_SUCCESS;
    }
  }
  if (r != CUDA_SUCCESS) {
    // Not a handle we understand: let the real launch report it. Not cached.
    GPUALLOC_VERBOSE("cannot find the module of function handle %p: %s", handle, error_name(r));
    return CUDA_SUCCESS;
  }
  out->function = function;

  CUdeviceptr variable = 0;
  size_t bytes = 0;
  const std::string heap_variable(abi::heap_variable);
  r = d.cuModuleGetGlobal_v2(&variable, &bytes, module, heap_variable.c_str());
  if (r == CUDA_ERROR_NOT_FOUND) {
    out->has_runtime = false;
    cache().functions.emplace(std::make_pair(ctx, handle), *out);
    return CUDA_SUCCESS;
  }
  if (r != CUDA_SUCCESS) {
    GPUALLOC_VERBOSE("cannot look up %s in module %p: %s", heap_variable.c_str(), static_cast<void*>(module), error_name(r));
    return CUDA_SUCCESS;
  }
  if (bytes != sizeof(CUdeviceptr)) {
    GPUALLOC_LOG("module %p has a %s of %zu bytes, expected %zu; not set up", static_cast<void*>(module), heap_variable.c_str(),
                 bytes, sizeof(CUdeviceptr));
    return CUDA_SUCCESS;
  }

  context_heap* heap = nullptr;
  if ((r = ensure_heap(ctx, &heap)) != CUDA_SUCCESS) return r;
  if (!cache().modules_ready.count({ctx, module})) {
    if ((r = check_abi(*heap, module, function)) != CUDA_SUCCESS) return r;
    if ((r = write_heap_pointer(*heap, variable)) != CUDA_SUCCESS) {
      GPUALLOC_LOG("cannot set up module %p in context %llu: %s", static_cast<void*>(module), heap->ctx_id,
                   error_name(r));
      return r;
    }
    cache().modules_ready.insert({ctx, module});
    const char* name = nullptr;
    if (settings().verbose && d.cuFuncGetName(&name, function) != CUDA_SUCCESS) name = nullptr;
    GPUALLOC_VERBOSE("module %p set up in context %llu (first kernel: %s)", static_cast<void*>(module), heap->ctx_id,
                     name != nullptr ? name : "?");
  }
  out->has_runtime = true;
  cache().functions.emplace(std::make_pair(ctx, handle), *out);
  return CUDA_SUCCESS;
}

// Prepares `handle` in the current context ctx. state_lock() held.
CUresult prepare_locked(CUcontext ctx, void* handle, launch_info* info) {
  function_entry entry;
  auto it = cache().functions.find({ctx, handle});
  if (it != cache().functions.end()) {
    entry = it->second;
  } else {
    CUresult r = prepare_slow(ctx, handle, &entry);
    if (r != CUDA_SUCCESS) return r;
  }
  if (info != nullptr) {
    context_heap* heap = entry.has_runtime ? find_heap(ctx) : nullptr;
    info->ctx = ctx;
    info->checked = heap != nullptr && (heap->flags & heap_flag_checked);
    info->function = entry.function;
  }
  return CUDA_SUCCESS;
}

void collect_kernel_nodes(CUgraph graph, std::vector<CUDA_KERNEL_NODE_PARAMS_v2>& out, int depth) {
  const driver_api& d = driver();
  if (depth > 64) return;  // graphs nest far less; guards against a cycle we cannot have
  size_t count = 0;
  if (d.cuGraphGetNodes(graph, nullptr, &count) != CUDA_SUCCESS || count == 0) return;
  std::vector<CUgraphNode> nodes(count);
  if (d.cuGraphGetNodes(graph, nodes.data(), &count) != CUDA_SUCCESS) return;
  nodes.resize(count);
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type;
    if (d.cuGraphNodeGetType(node, &type) != CUDA_SUCCESS) continue;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
      CUDA_KERNEL_NODE_PARAMS_v2 params{};
      if (d.cuGraphKernelNodeGetParams_v2(node, &params) == CUDA_SUCCESS) out.push_back(params);
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child = nullptr;
      if (d.cuGraphChildGraphNodeGetGraph(node, &child) == CUDA_SUCCESS) collect_kernel_nodes(child, out, depth + 1);
    }
    // Conditional nodes' bodies cannot be listed (no driver call returns them):
    // their kernel nodes are prepared when they are added (cuGraphAddKernelNode
    // / cuGraphAddNode hooks) or captured (launch hooks).
  }
}

}  // namespace

CUresult prepare_launch(CUfunction f, launch_info* info) {
  const driver_api& d = driver();
  if (!d.loaded || f == nullptr) return CUDA_SUCCESS;
  CUcontext ctx = nullptr;
  if (d.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(state_lock());
  return prepare_locked(ctx, f, info);
}

CUresult prepare_kernel_node(CUfunction func, CUkernel kern, CUcontext ctx) {
  const driver_api& d = driver();
  if (!d.loaded) return CUDA_SUCCESS;
  // A CUfunction belongs to the current context; a CUkernel to the node's
  // context, or the current one when the node names none.
  void* handle = func != nullptr ? static_cast<void*>(func) : static_cast<void*>(kern);
  if (handle == nullptr) return CUDA_SUCCESS;
  if (func != nullptr || ctx == nullptr) {
    if (d.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return CUDA_SUCCESS;
  }
  context_scope scope(ctx);
  if (scope.status() != CUDA_SUCCESS) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(state_lock());
  return prepare_locked(ctx, handle, nullptr);
}

CUresult prepare_graph(CUgraph graph) {
  if (!driver().loaded || graph == nullptr) return CUDA_SUCCESS;
  std::vector<CUDA_KERNEL_NODE_PARAMS_v2> kernels;
  collect_kernel_nodes(graph, kernels, 0);
  for (const CUDA_KERNEL_NODE_PARAMS_v2& k : kernels) {
    CUresult r = prepare_kernel_node(k.func, k.kern, k.ctx);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

void after_launch(const launch_info& info, CUstream stream, bool per_thread) {
  if (!info.checked) return;
  const driver_api& d = driver();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  auto is_capturing = per_thread && d.cuStreamIsCapturing_ptsz != nullptr ? d.cuStreamIsCapturing_ptsz
                                                                          : d.cuStreamIsCapturing;
  if (is_capturing(stream, &capture) != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE) return;

  std::lock_guard<std::mutex> lock(state_lock());
  context_heap* found = find_heap(info.ctx);
  if (found == nullptr) return;  // the context went away meanwhile
  context_heap& heap = *found;
  heap_counters counters{};
  CUresult r = read_counters(heap, &counters);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    if (d.cuFuncGetName(&name, info.function) != CUDA_SUCCESS) name = "?";
    GPUALLOC_LOG("checked mode: kernel %s failed: %s", name, error_name(r));
    return;
  }
  const std::uint64_t errors = counters.double_frees + counters.foreign_frees;
  if (errors > heap.errors_reported) {
    const char* name = nullptr;
    if (d.cuFuncGetName(&name, info.function) != CUDA_SUCCESS || name == nullptr) name = "?";
    GPUALLOC_LOG("checked mode: kernel %s made %llu invalid free(s) in context %llu (%llu double, %llu foreign so far)",
                 name, static_cast<unsigned long long>(errors - heap.errors_reported), heap.ctx_id,
                 static_cast<unsigned long long>(counters.double_frees),
                 static_cast<unsigned long long>(counters.foreign_frees));
    heap.errors_reported = errors;
  }
}

void forget_modules() {
  std::lock_guard<std::mutex> lock(state_lock());
  cache().functions.clear();
  cache().modules_ready.clear();
}

void forget_context_modules(CUcontext ctx) {
  std::erase_if(cache().functions, [ctx](const auto& kv) { return kv.first.first == ctx; });
  std::erase_if(cache().modules_ready, [ctx](const auto& m) { return m.first == ctx; });
}

}  // namespace gpualloc::interpose
