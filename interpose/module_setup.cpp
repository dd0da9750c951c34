// Launch preparation and the module caches (see module_setup.h).
#include "module_setup.h"

#include <pthread.h>

#include <cstdint>
#include <mutex>
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

// A (context id, handle) pair.
using key = std::pair<unsigned long long, const void*>;

struct key_hash {
  std::size_t operator()(const key& k) const {
    return std::hash<std::uintptr_t>()(k.first * 0x9e3779b97f4a7c15ull ^ reinterpret_cast<std::uintptr_t>(k.second));
  }
};

struct function_entry {
  bool has_runtime = false;
  CUfunction function = nullptr;  // the CUfunction in this context
};

// Never destroyed (hooks may run during exit). The lock guards the tables
// only: nothing waits for the device while it is held.
struct caches {
  std::mutex lock;
  std::unordered_map<key, function_entry, key_hash> functions;
  std::unordered_set<key, key_hash> modules_ready;
  std::unordered_map<CUgraphNode, std::vector<CUgraph>> conditional_bodies;
};

caches* current_caches = nullptr;

caches& cache() {
  static std::once_flag once;
  std::call_once(once, [] {
    current_caches = new caches();
    // A forked child has none of the parent's modules or contexts.
    pthread_atfork(nullptr, nullptr, [] { current_caches = new caches(); });
  });
  return *current_caches;
}

bool cached(const key& k, function_entry* out) {
  std::lock_guard<std::mutex> lock(cache().lock);
  auto it = cache().functions.find(k);
  if (it == cache().functions.end()) return false;
  *out = it->second;
  return true;
}

void remember(const key& k, const function_entry& e) {
  std::lock_guard<std::mutex> lock(cache().lock);
  cache().functions.emplace(k, e);
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

// The slow path: first launch of `handle` in ctx (current).
CUresult prepare_slow(CUcontext ctx, unsigned long long ctx_id, void* handle, function_entry* out) {
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
    remember({ctx_id, handle}, *out);
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

  heap_ref heap;
  if ((r = ensure_heap(ctx, &heap)) != CUDA_SUCCESS) return r;
  bool ready;
  {
    std::lock_guard<std::mutex> lock(cache().lock);
    ready = cache().modules_ready.count({ctx_id, module}) != 0;
  }
  if (!ready) {
    // Two threads may both get here for one module: both write the same pointer.
    if ((r = check_abi(*heap, module, function)) != CUDA_SUCCESS) return r;
    if ((r = write_heap_pointer(*heap, variable)) != CUDA_SUCCESS) {
      GPUALLOC_LOG("cannot set up module %p in context %llu: %s", static_cast<void*>(module), heap->ctx_id,
                   error_name(r));
      return r;
    }
    {
      std::lock_guard<std::mutex> lock(cache().lock);
      cache().modules_ready.insert({ctx_id, module});
    }
    const char* name = nullptr;
    if (settings().verbose && d.cuFuncGetName(&name, function) != CUDA_SUCCESS) name = nullptr;
    GPUALLOC_VERBOSE("module %p set up in context %llu (first kernel: %s)", static_cast<void*>(module), heap->ctx_id,
                     name != nullptr ? name : "?");
  }
  out->has_runtime = true;
  remember({ctx_id, handle}, *out);
  return CUDA_SUCCESS;
}

// Prepares `handle` in the current context ctx.
CUresult prepare(CUcontext ctx, void* handle, launch_info* info) {
  const unsigned long long ctx_id = context_key(ctx);
  function_entry entry;
  if (!cached({ctx_id, handle}, &entry)) {
    CUresult r = prepare_slow(ctx, ctx_id, handle, &entry);
    if (r != CUDA_SUCCESS) return r;
  }
  if (info != nullptr) {
    heap_ref heap = entry.has_runtime && settings().check ? find_heap(ctx) : nullptr;
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
    } else if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      // CUDA 13 has no call that returns a conditional node's bodies; the
      // cuGraphAddNode hook recorded them when the node was made.
      std::vector<CUgraph> bodies;
      {
        std::lock_guard<std::mutex> lock(cache().lock);
        if (auto it = cache().conditional_bodies.find(node); it != cache().conditional_bodies.end()) bodies = it->second;
      }
      for (CUgraph body : bodies) collect_kernel_nodes(body, out, depth + 1);
    }
  }
}

}  // namespace

std::string name_of(CUfunction function) {
  const char* name = nullptr;
  if (driver().cuFuncGetName(&name, function) != CUDA_SUCCESS || name == nullptr) return "?";
  return name;
}

CUresult prepare_launch(CUfunction f, launch_info* info) {
  const driver_api& d = driver();
  if (!d.loaded || f == nullptr) return CUDA_SUCCESS;
  CUcontext ctx = nullptr;
  if (d.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return CUDA_SUCCESS;
  return prepare(ctx, f, info);
}

CUresult prepare_kernel_node(CUfunction func, CUkernel kern, CUcontext ctx, launch_info* info) {
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
  return prepare(ctx, handle, info);
}

void remember_conditional_bodies(CUgraphNode node, const CUgraph* bodies, unsigned count) {
  if (node == nullptr || bodies == nullptr) return;
  std::lock_guard<std::mutex> lock(cache().lock);
  cache().conditional_bodies[node].assign(bodies, bodies + count);
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

void forget_modules() {
  std::lock_guard<std::mutex> lock(cache().lock);
  cache().functions.clear();
  cache().modules_ready.clear();
}

void forget_context_modules(unsigned long long ctx_id) {
  std::lock_guard<std::mutex> lock(cache().lock);
  std::erase_if(cache().functions, [ctx_id](const auto& kv) { return kv.first.first == ctx_id; });
  std::erase_if(cache().modules_ready, [ctx_id](const auto& m) { return m.first == ctx_id; });
}

}  // namespace gpualloc::interpose
