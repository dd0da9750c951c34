// Heap creation, reset and teardown per context (see context_heaps.h).
#include "context_heaps.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "driver.h"
#include "checked_mode.h"
#include "embedded_file.h"
#include "gpualloc/abi.h"
#include "gpualloc/dispatch.h"
#include "log.h"
#include "statistics.h"

// The init kernel (runtime/src/init.cu) as a fatbin, embedded by cmake/Embed.cmake.
extern "C" const gpualloc::embedded_file gpualloc_init_fatbin[];

namespace gpualloc::interpose {
namespace {

// The tables and their lock. Never destroyed (hooks may run during exit,
// after static destructors); replaced, not cleaned, in a forked child.
struct tables {
  std::mutex lock;
  std::unordered_map<unsigned long long, heap_ref> heaps;  // by context id
  std::unordered_map<unsigned long long, std::uint64_t> wishes;
};

tables* current_tables = nullptr;

void fresh_tables_in_child() { current_tables = new tables(); }

tables& state() {
  static std::once_flag once;
  std::call_once(once, [] {
    current_tables = new tables();
    pthread_atfork(nullptr, nullptr, fresh_tables_in_child);
  });
  return *current_tables;
}

std::string strategy_name(strategy_id id) { return std::string(strategy(id).name); }

constexpr std::uint64_t largest_heap = env::largest_heap_bytes;

// Bytes to allocate for a heap with an arena in ctx (current).
std::uint64_t planned_bytes(unsigned long long key, std::uint64_t free_bytes) {
  const env::config& c = settings();
  std::uint64_t bytes;
  if (c.heap.is_set()) {
    bytes = c.heap.resolve(free_bytes);
  } else {
    tables& t = state();
    std::lock_guard<std::mutex> lock(t.lock);
    auto it = t.wishes.find(key);
    bytes = it != t.wishes.end() ? it->second : env::default_heap_bytes(free_bytes);
  }
  const std::uint64_t minimum =
      heap_bytes_without_arena(c.check ? heap_flag_checked : 0u) + 2 * arena_alignment;
  if (bytes < minimum) bytes = minimum;
  if (bytes > largest_heap) bytes = largest_heap;  // the allocation then fails with a message
  return round_up(bytes, arena_alignment);
}

CUresult load_init_kernel(context_heap& h) {
  if (h.init_kernel != nullptr) return CUDA_SUCCESS;
  const driver_api& d = driver();
  CUresult r = d.cuModuleLoadData(&h.init_module, gpualloc_init_fatbin[0].data);
  if (r == CUDA_SUCCESS) r = d.cuModuleGetFunction(&h.init_kernel, h.init_module, std::string(abi::init_kernel).c_str());
  if (r == CUDA_SUCCESS) r = d.cuModuleGetFunction(&h.walk_kernel, h.init_module, std::string(abi::walk_kernel).c_str());
  if (r != CUDA_SUCCESS)
    GPUALLOC_LOG("cannot load libgpualloc's init kernels in context %llu (device %d): %s (built for compute "
                 "capabilities %s)",
                 h.ctx_id, h.device, error_name(r), GPUALLOC_INIT_KERNEL_ARCHS_STRING);
  return r;
}

// Writes the header and runs the strategy's init phases on h.stream, then
// waits for them. h.ctx must be current.
CUresult initialise(context_heap& h) {
  const driver_api& d = driver();
  relaxed_capture_scope relaxed;

  // Built in host memory that outlives the copy (we synchronise below).
  auto header = std::make_unique<heap_header>();
  std::memset(header.get(), 0, sizeof(heap_header));
  header->magic = heap_magic;
  header->strategy = static_cast<std::uint32_t>(h.strategy);
  header->flags = h.flags;
  header->heap_bytes = h.bytes;
  // The checked region's and the arena's addresses follow from the device address of the header.
  lay_out_heap(header.get(), h.header, h.bytes, manages_arena(h.strategy));
  h.checks = header->checks;
  int sms = 1;
  d.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, h.device);
  const device_facts facts{static_cast<std::uint32_t>(sms > 0 ? sms : 1), settings().rw_unit_bytes};
  plan_strategy(header.get(), facts);
  CUresult r = d.cuMemcpyHtoDAsync_v2(h.header, header.get(), sizeof(heap_header), h.stream);
  if (r != CUDA_SUCCESS) return r;
  if (const std::uint64_t region = checked_region_bytes(header.get()); region != 0) {
    r = d.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(header->checks.kernel_names), 0, region, h.stream);
    if (r != CUDA_SUCCESS) return r;
    std::lock_guard<std::mutex> names(h.names_lock);
    h.kernel_slots.clear();
    h.kernel_names.assign(1, "?");
  }

  const int phases = init_phases(h.strategy);
  const bool walks = h.checks.walk_result != nullptr;  // checked mode walks the heap after each kernel
  if ((phases > 0 || walks) && (r = load_init_kernel(h)) != CUDA_SUCCESS) return r;
  for (int phase = 0; phase < phases; ++phase) {
    const init_grid grid = init_shape(header.get(), phase, facts);
    CUdeviceptr heap = h.header;
    void* args[] = {&heap, &phase};
    r = d.cuLaunchKernel(h.init_kernel, grid.blocks, 1, 1, grid.threads_per_block, 1, 1, 0, h.stream, args, nullptr);
    if (r != CUDA_SUCCESS) return r;
  }
  return d.cuStreamSynchronize(h.stream);
}

// Creates h's heap (h.ctx current; h.busy held). Releases what it made if it fails.
CUresult create(context_heap& h) {
  const driver_api& d = driver();
  const env::config& c = settings();
  const auto started = std::chrono::steady_clock::now();
  relaxed_capture_scope relaxed;

  h.strategy = c.strategy;
  h.flags = (c.stats ? heap_flag_stats : 0u) | (c.check ? heap_flag_checked : 0u) |
            (c.coalesce ? 0u : heap_flag_no_coalesce);
  CUresult r = d.cuCtxGetDevice(&h.device);
  if (r != CUDA_SUCCESS) return r;
  size_t free_bytes = 0, total_bytes = 0;
  if ((r = d.cuMemGetInfo_v2(&free_bytes, &total_bytes)) != CUDA_SUCCESS) return r;

  if (!manages_arena(h.strategy)) {
    // CUDA's heap holds the blocks; ours is only the header the runtime reads.
    // Its size: GPUALLOC_HEAP_SIZE, else what the program set (passed through
    // already), else gpualloc's default rather than CUDA's 8 MiB.
    if (c.heap.is_set() || !has_heap_wish(h.ctx)) {
      const std::uint64_t wanted =
          c.heap.is_set() ? c.heap.resolve(free_bytes) : env::default_heap_bytes(free_bytes);
      CUresult limit = d.cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, wanted);
      if (limit != CUDA_SUCCESS)
        GPUALLOC_LOG("warning: cannot set CUDA's heap to %s (%llu bytes) in context %llu: %s (a kernel using "
                     "CUDA's malloc already ran?)",
                     env::format_bytes(wanted).c_str(), static_cast<unsigned long long>(wanted), h.ctx_id,
                     error_name(limit));
    }
    size_t limit = 0;
    d.cuCtxGetLimit(&limit, CU_LIMIT_MALLOC_HEAP_SIZE);
    h.cuda_heap_bytes = limit;
    h.bytes = heap_bytes_without_arena(h.flags);
  } else {
    h.bytes = planned_bytes(h.ctx_id, free_bytes);
  }

  r = d.cuMemAlloc_v2(&h.header, h.bytes);
  if (r != CUDA_SUCCESS) {
    GPUALLOC_LOG("cannot allocate the %s heap of context %llu on device %d: tried %s (%llu bytes), %s (%llu bytes) "
                 "free of %s: %s; set GPUALLOC_HEAP_SIZE to a smaller size",
                 strategy_name(h.strategy).c_str(), h.ctx_id, h.device, env::format_bytes(h.bytes).c_str(),
                 static_cast<unsigned long long>(h.bytes), env::format_bytes(free_bytes).c_str(),
                 static_cast<unsigned long long>(free_bytes), env::format_bytes(total_bytes).c_str(), error_name(r));
    h.header = 0;
    return r;
  }
  r = d.cuStreamCreate(&h.stream, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS) r = initialise(h);
  if (r != CUDA_SUCCESS) {
    GPUALLOC_LOG("cannot initialise the %s heap of context %llu on device %d: %s", strategy_name(h.strategy).c_str(),
                 h.ctx_id, h.device, error_name(r));
    if (h.init_module != nullptr) d.cuModuleUnload(h.init_module);
    if (h.stream != nullptr) d.cuStreamDestroy_v2(h.stream);
    d.cuMemFree_v2(h.header);
    h.init_module = nullptr, h.init_kernel = nullptr, h.walk_kernel = nullptr, h.stream = nullptr, h.header = 0;
    return r;
  }

  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!manages_arena(h.strategy))
    GPUALLOC_VERBOSE("context %llu (device %d): strategy %s, CUDA's heap %s, header at 0x%llx (%.1f ms)", h.ctx_id,
                     h.device, strategy_name(h.strategy).c_str(), env::format_bytes(h.cuda_heap_bytes).c_str(),
                     static_cast<unsigned long long>(h.header), ms);
  else
    GPUALLOC_VERBOSE("context %llu (device %d): strategy %s, heap %s at 0x%llx, %s free before, %d init phase(s) (%.1f ms)",
                     h.ctx_id, h.device, strategy_name(h.strategy).c_str(), env::format_bytes(h.bytes).c_str(),
                     static_cast<unsigned long long>(h.header), env::format_bytes(free_bytes).c_str(),
                     init_phases(h.strategy), ms);
  return CUDA_SUCCESS;
}

}  // namespace

std::uint64_t context_heap::shown_bytes() const { return manages_arena(strategy) ? bytes : cuda_heap_bytes; }

unsigned long long context_key(CUcontext ctx) {
  unsigned long long id = 0;
  const driver_api& d = driver();
  if (d.cuCtxGetId != nullptr && d.cuCtxGetId(ctx, &id) == CUDA_SUCCESS) return id;
  return reinterpret_cast<std::uintptr_t>(ctx);
}

heap_ref find_heap(CUcontext ctx) {
  const unsigned long long key = context_key(ctx);
  tables& t = state();
  std::lock_guard<std::mutex> lock(t.lock);
  auto it = t.heaps.find(key);
  return it != t.heaps.end() && it->second->ready ? it->second : nullptr;
}

CUresult ensure_heap(CUcontext ctx, heap_ref* out) {
  const unsigned long long key = context_key(ctx);
  tables& t = state();
  heap_ref h;
  {
    std::lock_guard<std::mutex> lock(t.lock);
    heap_ref& slot = t.heaps[key];
    if (slot == nullptr) {
      slot = std::make_shared<context_heap>();
      slot->ctx = ctx;
      slot->ctx_id = key;
    }
    h = slot;
  }
  std::lock_guard<std::mutex> busy(h->busy);
  if (!h->ready) {
    if (CUresult r = create(*h); r != CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(t.lock);
      if (auto it = t.heaps.find(key); it != t.heaps.end() && it->second == h) t.heaps.erase(it);
      return r;
    }
    h->ready = true;
    register_exit_report();
  }
  *out = h;
  return CUDA_SUCCESS;
}

CUresult reset_heap(context_heap& h) {
  std::lock_guard<std::mutex> busy(h.busy);
  context_scope scope(h.ctx);
  if (scope.status() != CUDA_SUCCESS) return scope.status();
  relaxed_capture_scope relaxed;
  CUresult r = driver().cuCtxSynchronize();
  if (r != CUDA_SUCCESS) return r;
  h.errors_reported = 0;
  return initialise(h);
}

CUresult read_counters(context_heap& h, heap_counters* out, bool whole_context, CUstream stream) {
  const driver_api& d = driver();
  std::lock_guard<std::mutex> busy(h.busy);
  context_scope scope(h.ctx);
  if (scope.status() != CUDA_SUCCESS) return scope.status();
  relaxed_capture_scope relaxed;
  CUresult r = whole_context ? d.cuCtxSynchronize() : d.cuStreamSynchronize(stream);
  if (r == CUDA_SUCCESS)
    r = d.cuMemcpyDtoHAsync_v2(out, h.header + offsetof(heap_header, counters), sizeof(heap_counters), h.stream);
  if (r == CUDA_SUCCESS) r = d.cuStreamSynchronize(h.stream);
  return r;
}

namespace {

constexpr unsigned walk_threads = 256;

// The blocks of a walk over h: one thread per live-map word or quarantine
// slot, up to 64 blocks of walk_threads per SM.
unsigned walk_blocks(const context_heap& h) {
  int sms = 1;
  driver().cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, h.device);
  const std::uint64_t items = std::max(h.checks.live_words, h.checks.quarantine_slots);
  return static_cast<unsigned>(std::clamp<std::uint64_t>((items + walk_threads - 1) / walk_threads, 1, 64ull * sms));
}

// Launches walk `task` over h on `stream`.
CUresult launch_walk(context_heap& h, checked::walk task, CUstream stream) {
  CUdeviceptr heap = h.header;
  int task_number = static_cast<int>(task);
  void* args[] = {&heap, &task_number};
  return driver().cuLaunchKernel(h.walk_kernel, walk_blocks(h), 1, 1, walk_threads, 1, 1, 0, stream, args, nullptr);
}

}  // namespace

CUresult queue_sweep(context_heap& h, CUstream stream) {
  context_scope scope(h.ctx);
  if (scope.status() != CUDA_SUCCESS) return scope.status();
  if (h.walk_kernel == nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // not in checked mode
  return launch_walk(h, checked::walk::sweep, stream);
}

CUresult add_sweep_node(context_heap& h, CUgraph graph, CUgraphNode after, CUgraphNode* sweep) {
  if (h.walk_kernel == nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // not in checked mode
  CUdeviceptr heap = h.header;
  int task_number = static_cast<int>(checked::walk::sweep);
  void* args[] = {&heap, &task_number};  // the node keeps copies of the values
  CUDA_KERNEL_NODE_PARAMS_v2 params{};
  params.func = h.walk_kernel;
  params.gridDimX = walk_blocks(h);
  params.gridDimY = params.gridDimZ = 1;
  params.blockDimX = walk_threads;
  params.blockDimY = params.blockDimZ = 1;
  params.kernelParams = args;
  params.ctx = h.ctx;
  return driver().cuGraphAddKernelNode_v2(sweep, graph, &after, 1, &params);
}

CUresult walk_heap(context_heap& h, checked::walk task, CUstream after, std::uint64_t threshold,
                   checked::walk_result* out) {
  const driver_api& d = driver();
  std::lock_guard<std::mutex> busy(h.busy);
  context_scope scope(h.ctx);
  if (scope.status() != CUDA_SUCCESS) return scope.status();
  relaxed_capture_scope relaxed;
  const auto result = reinterpret_cast<CUdeviceptr>(h.checks.walk_result);
  if (result == 0 || h.walk_kernel == nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // not in checked mode
  CUresult r = d.cuStreamSynchronize(after);
  if (r != CUDA_SUCCESS) return r;
  if ((r = d.cuMemsetD8Async(result, 0, sizeof(checked::walk_result), h.stream)) != CUDA_SUCCESS) return r;
  if ((r = d.cuMemcpyHtoDAsync_v2(result + offsetof(checked::walk_result, threshold), &threshold, sizeof threshold,
                                  h.stream)) != CUDA_SUCCESS)
    return r;
  r = launch_walk(h, task, h.stream);
  if (r == CUDA_SUCCESS && out != nullptr) r = d.cuMemcpyDtoHAsync_v2(out, result, sizeof *out, h.stream);
  if (r == CUDA_SUCCESS) r = d.cuStreamSynchronize(h.stream);
  return r;
}

void retire_context(unsigned long long key, const heap_counters* known) {
  tables& t = state();
  heap_ref h;
  {
    std::lock_guard<std::mutex> lock(t.lock);
    t.wishes.erase(key);
    auto it = t.heaps.find(key);
    if (it == t.heaps.end()) return;
    h = it->second;
    t.heaps.erase(it);
  }
  if (!h->ready) return;
  if (settings().stats || settings().check) {
    heap_counters counters{};
    CUresult r = CUDA_SUCCESS;
    if (known != nullptr)
      counters = *known;
    else
      r = read_counters(*h, &counters, true);
    if (r == CUDA_SUCCESS) {
      remember_retired(*h, counters);
      report_leaks(*h, counters, "the context goes away");
    }
    else
      GPUALLOC_LOG("cannot read the statistics of context %llu before it goes away: %s", h->ctx_id, error_name(r));
  }
  GPUALLOC_VERBOSE("context %llu (device %d) goes away with its heap", h->ctx_id, h->device);
  // The memory, the stream and the init module go with the context.
}

bool set_heap_wish(CUcontext ctx, std::uint64_t bytes) {
  if (bytes > largest_heap) {
    GPUALLOC_LOG("cudaDeviceSetLimit(cudaLimitMallocHeapSize, %llu): no device has that much memory",
                 static_cast<unsigned long long>(bytes));
    return false;
  }
  const unsigned long long key = context_key(ctx);
  tables& t = state();
  std::lock_guard<std::mutex> lock(t.lock);
  t.wishes[key] = bytes;
  return true;
}

bool has_heap_wish(CUcontext ctx) {
  const unsigned long long key = context_key(ctx);
  tables& t = state();
  std::lock_guard<std::mutex> lock(t.lock);
  return t.wishes.count(key) != 0;
}

std::uint64_t heap_size_for_limit(CUcontext ctx) {
  if (heap_ref h = find_heap(ctx)) return h->bytes;
  size_t free_bytes = 0, total_bytes = 0;
  driver().cuMemGetInfo_v2(&free_bytes, &total_bytes);
  return planned_bytes(context_key(ctx), free_bytes);
}

std::vector<heap_ref> all_heaps() {
  tables& t = state();
  std::lock_guard<std::mutex> lock(t.lock);
  std::vector<heap_ref> out;
  for (auto& [key, h] : t.heaps)
    if (h->ready) out.push_back(h);
  return out;
}

}  // namespace gpualloc::interpose
