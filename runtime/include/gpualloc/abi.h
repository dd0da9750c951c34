// The names and numbers that the compiler side (the pass, gpualloc-ptxas),
// the device runtime and libgpualloc must agree on: one place, so a module
// built by another gpualloc version is refused rather than misread.
//
// Plain C++ without CUDA or LLVM: every part of gpualloc includes it.
//
// What a device module carries:
//  - user code: calls of the entry points below instead of malloc/free/new/delete;
//  - unpinned (the strategy is chosen at run time): no runtime code, the
//    entry points are resolved by trapping stubs, and the module's own PTX
//    rides along in the global `ptx_blob` (gpualloc-ptxas puts it there).
//    libgpualloc replaces the module at load time by that PTX joined with the
//    chosen strategy's runtime PTX (specialise/);
//  - pinned (gpualloc-clang++ --gpualloc-strategy=NAME): the strategy's runtime
//    linked and inlined at compile time, and the marker global pin_prefix+NAME;
//  - either way, once it can allocate: `heap_variable` (set by libgpualloc
//    before the module's first launch in a context) and `abi_variable`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpualloc::abi {

// Bumped whenever anything below, the entry points' signatures or the heap
// header (heap.h) changes meaning.
inline constexpr std::uint32_t version = 6;

// The entry points (extern "C", device). `size`/`align` are u64, pointers generic.
inline constexpr std::string_view malloc_entry = "__gpualloc_malloc";                  // ptr (size): lanes may ask for different sizes
inline constexpr std::string_view malloc_same_size_entry = "__gpualloc_malloc_same_size";  // ptr (size): the size is warp-uniform
inline constexpr std::string_view malloc_lane_entry = "__gpualloc_malloc_lane";        // ptr (size): no coalescing
inline constexpr std::string_view free_entry = "__gpualloc_free";                      // void (ptr)
inline constexpr std::string_view free_lane_entry = "__gpualloc_free_lane";            // void (ptr): no coalescing
inline constexpr std::string_view malloc_aligned_entry = "__gpualloc_malloc_aligned";  // ptr (size, align)
inline constexpr std::string_view malloc_aligned_lane_entry = "__gpualloc_malloc_aligned_lane";
inline constexpr std::string_view free_aligned_entry = "__gpualloc_free_aligned";      // void (ptr, align)
inline constexpr std::string_view free_aligned_lane_entry = "__gpualloc_free_aligned_lane";
// void (ptr, size): a load of `size` bytes at ptr returned freed_byte or
// zone_byte in every byte (checked.h, quarantine.h): checked mode looks
// whether it read a freed block or a red zone. Called only by code compiled
// with gpualloc-clang++ --gpualloc-check-reads.
inline constexpr std::string_view check_read_entry = "__gpualloc_check_read";

// Every entry point, for those who look for any of them.
inline constexpr std::string_view entry_points[] = {
    malloc_entry,      malloc_same_size_entry,    malloc_lane_entry,  free_entry,
    free_lane_entry,   malloc_aligned_entry,      malloc_aligned_lane_entry,
    free_aligned_entry, free_aligned_lane_entry,  check_read_entry};

constexpr bool is_entry_point(std::string_view name) {
  for (std::string_view e : entry_points)
    if (name == e) return true;
  return false;
}

// Runtime functions in namespace gpualloc::detail::checked_only (allocate.h)
// run only on a checked heap (GPUALLOC_CHECK=1). A module joined for
// unchecked heaps has a trap in place of their bodies (specialise/join.h);
// the join finds them by this word of their mangled names.
inline constexpr std::string_view checked_only_namespace = "checked_only";

// One-way fences at GPU scope. The runtime is built for the oldest GPU,
// where the lightest fence is the two-way fence.acq_rel; from sm_90 with
// PTX ISA 8.6, fence.release skips the acquire's invalidation of the SM's
// L1 (ptxas 13.0, sm_90: no CCTL.IVALL after its MEMBAR), and fence.acquire
// need not wait for the thread's writes (not checked in SASS). The
// runtime writes each as this inline assembly, valid PTX for every GPU
// (detail/atomic.h); the pass turns it into LLVM's fence at device scope,
// which the backend lowers for the module's GPU (pinned modules), and the
// join into the one-way fence where the module's .target is sm_90 or later
// (specialise/join.h).
#define GPUALLOC_RELEASE_FENCE_ASM "fence.acq_rel.gpu; // gpualloc: release fence"
#define GPUALLOC_ACQUIRE_FENCE_ASM "fence.acq_rel.gpu; // gpualloc: acquire fence"
inline constexpr std::string_view release_fence_asm = GPUALLOC_RELEASE_FENCE_ASM;
inline constexpr std::string_view acquire_fence_asm = GPUALLOC_ACQUIRE_FENCE_ASM;
inline constexpr std::string_view release_fence_sm90 = "fence.release.gpu;";
inline constexpr std::string_view acquire_fence_sm90 = "fence.acquire.gpu;";
inline constexpr int one_way_fence_sm = 90;            // the oldest GPU with them
inline constexpr int one_way_fence_ptx_version = 806;  // and the PTX ISA (8.6, as ptx::version_number counts)

// Module globals.
inline constexpr std::string_view heap_variable = "__gpualloc_heap";  // heap_header*, written by libgpualloc
inline constexpr std::string_view abi_variable = "__gpualloc_abi";    // u32 = version, where runtime code is
inline constexpr std::string_view pin_prefix = "__gpualloc_pin_";     // + pin_suffix(name): a pinned module
inline constexpr std::string_view ptx_blob = "__gpualloc_ptx";        // bytes: an unpinned module's own PTX

// The kernel of a strategy's runtime module that runs init phases:
// __gpualloc_init(heap_header* heap, int phase).
inline constexpr std::string_view init_kernel = "__gpualloc_init";
// Its kernel of checked mode's walks (walks.h): __gpualloc_walk(heap_header* heap, int task).
inline constexpr std::string_view walk_kernel = "__gpualloc_walk";

// The prefix of every other symbol of a runtime module, so that it cannot
// collide with a name of the user's module it is joined with.
inline constexpr std::string_view runtime_private_prefix = "__gpualloc_rt.";

// A strategy name as it may appear in a PTX identifier ("ouroboros-p-s" -> "ouroboros_p_s").
inline std::string pin_symbol(std::string_view strategy_name) {
  std::string s(pin_prefix);
  for (char c : strategy_name) s += c == '-' ? '_' : c;
  return s;
}

}  // namespace gpualloc::abi
