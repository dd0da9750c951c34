// Checked mode's host side (see checked_mode.h).
#include "checked_mode.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>

#include "driver.h"
#include "env.h"
#include "log.h"

namespace gpualloc::interpose {
namespace {

bool capturing(CUstream stream, bool per_thread) {
  const driver_api& d = driver();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  auto is_capturing = per_thread && d.cuStreamIsCapturing_ptsz != nullptr ? d.cuStreamIsCapturing_ptsz
                                                                          : d.cuStreamIsCapturing;
  return is_capturing(stream, &capture) != CUDA_SUCCESS || capture != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUstream launch_stream(CUstream stream, bool per_thread) {
  return stream == nullptr && per_thread ? CU_STREAM_PER_THREAD : stream;
}

// The slot of f's name in h's kernel names, written there the first time
// (0 once every slot is taken: reports say "?").
std::uint32_t kernel_slot(context_heap& h, CUfunction f) {
  std::lock_guard<std::mutex> lock(h.names_lock);
  if (auto it = h.kernel_slots.find(f); it != h.kernel_slots.end()) return it->second;
  if (h.kernel_names.size() >= kernel_name_slots) return 0;
  std::string name = name_of(f);
  char bytes[kernel_name_bytes] = {};
  name.copy(bytes, kernel_name_bytes - 1);
  const driver_api& d = driver();
  const auto slot = static_cast<std::uint32_t>(h.kernel_names.size());
  const auto at = reinterpret_cast<CUdeviceptr>(h.checks.kernel_names) + std::uint64_t{slot} * kernel_name_bytes;
  context_scope scope(h.ctx);
  relaxed_capture_scope relaxed;
  if (scope.status() != CUDA_SUCCESS || d.cuMemcpyHtoDAsync_v2(at, bytes, sizeof bytes, h.stream) != CUDA_SUCCESS ||
      d.cuStreamSynchronize(h.stream) != CUDA_SUCCESS)
    return 0;
  h.kernel_slots.emplace(f, slot);
  h.kernel_names.push_back(std::move(name));
  return slot;
}

// Where the heap learns which kernel runs: the slot of its name.
CUdeviceptr stamp_address(const context_heap& h) {
  return h.header + offsetof(heap_header, checks) + offsetof(checked_region, kernel);
}

std::string name_in_slot(context_heap& h, std::uint32_t slot) {
  std::lock_guard<std::mutex> lock(h.names_lock);
  return slot < h.kernel_names.size() ? h.kernel_names[slot] : "?";
}

std::string place_text(const checked::place& p) {
  char text[96];
  std::snprintf(text, sizeof text, "block (%u,%u,%u) thread (%u,%u,%u)", p.block[0], p.block[1], p.block[2],
                p.thread & 0x3ff, p.thread >> 10 & 0x3ff, p.thread >> 20 & 0x3f);
  return text;
}

// The smallest size among the `wanted` largest live blocks, rounded down to a power of two.
std::uint64_t listing_threshold(const checked::walk_result& census, std::uint64_t wanted) {
  std::uint64_t blocks = 0;
  for (int bin = 63; bin > 0; --bin)
    if ((blocks += census.by_size[bin]) >= wanted) return std::uint64_t{1} << bin;
  return 0;
}

}  // namespace

void before_launch(const launch_info& info, CUstream stream, bool per_thread) {
  if (!info.checked) return;
  heap_ref heap = find_heap(info.ctx);
  if (heap == nullptr || heap->checks.kernel_names == nullptr) return;
  const std::uint32_t slot = kernel_slot(*heap, info.function);
  // Ordered before the kernel on its own stream (a memset node of the graph, when the stream is captured).
  driver().cuMemsetD32Async(stamp_address(*heap), slot, 1, launch_stream(stream, per_thread));
}

CUresult add_kernel_node(const launch_info& info, CUgraph graph, const CUgraphNode* deps, size_t count,
                         CUgraphNode* node, const std::function<CUresult(const CUgraphNode*, size_t)>& add) {
  heap_ref heap = info.checked && node != nullptr ? find_heap(info.ctx) : nullptr;
  if (heap == nullptr || heap->checks.kernel_names == nullptr) return add(deps, count);
  const driver_api& d = driver();
  CUDA_MEMSET_NODE_PARAMS stamp_params{};
  stamp_params.dst = stamp_address(*heap);
  stamp_params.value = kernel_slot(*heap, info.function);
  stamp_params.elementSize = sizeof(std::uint32_t);
  stamp_params.width = 1;
  stamp_params.height = 1;
  CUgraphNode stamp = nullptr;
  if (d.cuGraphAddMemsetNode(&stamp, graph, deps, count, &stamp_params, info.ctx) != CUDA_SUCCESS)
    return add(deps, count);  // unstamped: its reports name the kernel before it
  const CUresult r = add(&stamp, 1);
  if (r != CUDA_SUCCESS) {
    d.cuGraphDestroyNode(stamp);
    return r;
  }
  CUgraphNode sweep = nullptr;
  if (add_sweep_node(*heap, graph, *node, &sweep) != CUDA_SUCCESS)
    GPUALLOC_LOG("checked mode: no sweep after a graph node of kernel %s", name_of(info.function).c_str());
  return r;
}

void after_launch(const launch_info& info, CUstream stream, bool per_thread) {
  if (!info.checked) return;
  if (capturing(stream, per_thread)) {
    // The kernel runs later, in a graph: the sweep joins it there, and the
    // device's reports are all there is (no host summary).
    if (heap_ref heap = find_heap(info.ctx)) queue_sweep(*heap, launch_stream(stream, per_thread));
    return;
  }
  // Only the launch's own stream is waited for, and no lock is held meanwhile:
  // a kernel that waits for another host thread's work cannot deadlock here.
  heap_ref heap = find_heap(info.ctx);
  if (heap == nullptr) return;  // the context went away meanwhile
  heap_counters counters{};
  CUresult r = walk_heap(*heap, checked::walk::sweep, launch_stream(stream, per_thread), 0, nullptr);
  if (r == CUDA_SUCCESS) r = read_counters(*heap, &counters, false, heap->stream);
  if (r != CUDA_SUCCESS) {
    GPUALLOC_LOG("checked mode: kernel %s failed: %s", name_of(info.function).c_str(), error_name(r));
    return;
  }
  const std::uint64_t errors =
      counters.double_frees + counters.foreign_frees + counters.overflows + counters.use_after_frees;
  std::uint64_t reported = heap->errors_reported.load();
  while (errors > reported && !heap->errors_reported.compare_exchange_weak(reported, errors)) {
  }
  if (errors > reported)
    GPUALLOC_LOG("checked mode: kernel %s made %llu heap error(s) in context %llu (so far %llu double free(s), "
                 "%llu foreign free(s), %llu overflow(s), %llu use(s) after free)",
                 name_of(info.function).c_str(), static_cast<unsigned long long>(errors - reported), heap->ctx_id,
                 static_cast<unsigned long long>(counters.double_frees),
                 static_cast<unsigned long long>(counters.foreign_frees),
                 static_cast<unsigned long long>(counters.overflows),
                 static_cast<unsigned long long>(counters.use_after_frees));
}

void report_leaks(context_heap& h, const heap_counters& counters, const char* when) {
  if (counters.mallocs <= counters.frees) return;
  const std::uint64_t live = counters.mallocs - counters.frees;
  if (h.flags & heap_flag_stats)
    GPUALLOC_LOG("%llu block(s) of %s still allocated in context %llu when %s", static_cast<unsigned long long>(live),
                 env::format_bytes(counters.bytes_in_use).c_str(), h.ctx_id, when);
  else
    GPUALLOC_LOG("%llu block(s) still allocated in context %llu when %s", static_cast<unsigned long long>(live),
                 h.ctx_id, when);
  if (h.checks.live == nullptr) return;  // no map of live blocks: counted, not listed

  constexpr std::uint64_t largest = 5;
  auto census = std::make_unique<checked::walk_result>();
  auto listing = std::make_unique<checked::walk_result>();
  CUresult r = walk_heap(h, checked::walk::census, h.stream, 0, census.get());
  if (r == CUDA_SUCCESS)
    r = walk_heap(h, checked::walk::listing, h.stream, listing_threshold(*census, largest), listing.get());
  if (r != CUDA_SUCCESS) {
    GPUALLOC_LOG("cannot list the live blocks of context %llu: %s", h.ctx_id, error_name(r));
    return;
  }
  const std::uint32_t found = std::min<std::uint32_t>(listing->records, checked::most_leak_records);
  std::sort(listing->record, listing->record + found,
            [](const checked::leak_record& a, const checked::leak_record& b) { return a.requested > b.requested; });
  const std::uint64_t shown = std::min<std::uint64_t>(found, largest);
  GPUALLOC_LOG("checked mode: the %llu largest of them (%s in all):", static_cast<unsigned long long>(shown),
               env::format_bytes(census->live_bytes).c_str());
  for (std::uint64_t i = 0; i < shown; ++i) {
    const checked::leak_record& leak = listing->record[i];
    GPUALLOC_LOG("  %llu bytes at 0x%llx, allocated by kernel %s %s", static_cast<unsigned long long>(leak.requested),
                 static_cast<unsigned long long>(leak.address), name_in_slot(h, leak.allocated.kernel).c_str(),
                 place_text(leak.allocated).c_str());
  }
}

}  // namespace gpualloc::interpose
