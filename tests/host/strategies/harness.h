// What the host strategy tests share (stress.cpp, warp_tests.cpp,
// fault_tests.cpp): heaps laid out and initialised as libgpualloc does, with a
// shadow map that catches overlapping blocks, patterned blocks, a random
// number generator, the failure count.
//
// Include it first, before any gpualloc header: it installs the circular
// strategies' test hook (fault_tests.cpp), and every translation unit of the
// binary must see the same definition of the strategies.
#pragma once

// The circular strategies' walk calls this between choosing a chunk and
// advancing its segment's cursor (fault_tests.cpp forces a free into it).
void circular_take_hook();
#define GPUALLOC_TEST_HOOK_CIRCULAR_TAKE() ::circular_take_hook()

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpualloc/allocate.h"
#include "gpualloc/detail/host_warp.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/dispatch.h"
#include "gpualloc/heap.h"
#include "gpualloc/registry.h"
#include "host_test.h"


namespace stress {

using gpualloc::heap_header;
using gpualloc::reuse_policy;
using gpualloc::strategy_id;
using gpualloc::strategy_info;

struct options {
  std::vector<std::string> only;
  int rounds = HOST_TEST_TSAN ? 40 : 400;
  int threads = 8;
  std::uint64_t heap_mib = 16;
  int steps = HOST_TEST_TSAN ? 100 : 400;  // of each warp, in warp mode (warp_tests.cpp)
};

inline std::atomic<int> failures{0};

// The stress binary's output. stdout gets a line as each strategy begins
// and ends, and every failure: short, so that lit, which shows 10 KB of
// each stream of a failing test, shows all of it. The tests' details go to
// stderr with note(), beside the reports that the checked-mode tests
// provoke on purpose (about 750 KB).

// Counts a failure and prints it to both streams, in one piece (lanes fail concurrently).
__attribute__((format(printf, 1, 2))) inline void fail(const char* format, ...) {
  char what[512];
  std::va_list args;
  va_start(args, format);
  std::vsnprintf(what, sizeof what, format, args);
  va_end(args);
  std::fprintf(stderr, "FAILED: %s\n", what);
  std::printf("FAILED: %s\n", what);
  std::fflush(stdout);
  failures.fetch_add(1);
}

// A detail of a test that passed so far: what it did, to stderr.
__attribute__((format(printf, 1, 2))) inline void note(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
}
#define FAIL(...) ::stress::fail(__VA_ARGS__)

// A strategy's name for printf: "%.*s", NAME(s).
#define NAME(s) (int)(s).name.size(), (s).name.data()

using host_test::rng;

// As the GPU conformance suite: 60% 1-64 B, 25% up to 512 B, 10% up to 4 KiB, 5% up to 9000 B.
inline std::uint64_t request_size(rng& r) {
  std::uint64_t pick = r.below(100);
  if (pick < 60) return 1 + r.below(64);
  if (pick < 85) return 65 + r.below(448);
  if (pick < 95) return 513 + r.below(3584);
  return 4097 + r.below(4904);
}

// As libgpualloc: the strategy's plan on the host, then each init phase, here
// on `threads` CPU threads (a phase ends before the next begins).
inline void initialise(heap_header* h, int threads) {
  gpualloc::plan_strategy(h, gpualloc::device_facts{gpualloc::detail::host_sm_count});
  for (int phase = 0; phase < gpualloc::init_phases(static_cast<strategy_id>(h->strategy)); ++phase) {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([=] { gpualloc::init_strategy(h, phase, t, threads); });
    for (auto& t : ts) t.join();
  }
}

// One heap: header + arena in aligned host memory, initialised like libgpualloc does.
class test_heap {
 public:
  test_heap(strategy_id id, std::uint64_t bytes, std::uint32_t flags, int init_threads) : bytes_(bytes) {
    memory_ = static_cast<std::byte*>(std::aligned_alloc(gpualloc::arena_alignment, bytes));
    std::memset(memory_, 0xa5, bytes);  // strategies must not count on zeroed memory
    h_ = new (memory_) heap_header{};
    h_->strategy = static_cast<std::uint32_t>(id);
    h_->flags = flags;
    h_->heap_bytes = bytes;
    gpualloc::lay_out_heap(h_, bytes, true);
    if (const std::uint64_t region = gpualloc::checked_region_bytes(h_)) std::memset(h_->checks.kernel_names, 0, region);
    initialise(h_, init_threads);
    h_->magic = gpualloc::heap_magic;
    granules_ = h_->space.bytes / 16;
    shadow_ = std::make_unique<std::atomic<std::uint16_t>[]>(granules_);
  }
  ~test_heap() { std::free(memory_); }

  heap_header* get() const { return h_; }
  std::uint64_t arena_bytes() const { return h_->space.bytes; }

  // Claims [p, p + size) for `owner` in the shadow map; false if another live block holds part of it.
  bool claim(const void* p, std::uint64_t size, std::uint16_t owner) {
    if (!h_->space.contains(p)) return true;  // the cuda strategy: libc memory
    std::uint64_t first = (static_cast<const std::byte*>(p) - h_->space.begin) / 16;
    std::uint64_t last = first + (size + 15) / 16;
    if (last > granules_) return false;
    for (std::uint64_t g = first; g < last; ++g) {
      std::uint16_t expected = 0;
      if (!shadow_[g].compare_exchange_strong(expected, owner, std::memory_order_relaxed)) {
        for (std::uint64_t u = first; u < g; ++u) shadow_[u].store(0, std::memory_order_relaxed);
        return false;
      }
    }
    return true;
  }
  void release(const void* p, std::uint64_t size) {
    if (!h_->space.contains(p)) return;
    std::uint64_t first = (static_cast<const std::byte*>(p) - h_->space.begin) / 16;
    for (std::uint64_t g = first; g < first + (size + 15) / 16; ++g) shadow_[g].store(0, std::memory_order_relaxed);
  }

 private:
  std::uint64_t bytes_;
  std::byte* memory_;
  heap_header* h_;
  std::uint64_t granules_;
  std::unique_ptr<std::atomic<std::uint16_t>[]> shadow_;
};

struct block {
  unsigned char* p;
  std::uint64_t size;
  unsigned char pattern;
};

inline bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % gpualloc::min_alignment == 0; }

inline void fill(const block& b) { std::memset(b.p, b.pattern, b.size); }

inline bool intact(const block& b) {
  for (std::uint64_t i = 0; i < b.size; ++i)
    if (b.p[i] != b.pattern) return false;
  return true;
}

// Allocates `size`-byte blocks until NULL (at most `cap`), filling each; returns them.
inline std::vector<block> exhaust(heap_header* h, test_heap& heap, std::uint64_t size, std::uint64_t cap, int thread,
                           bool& overlap) {
  std::vector<block> got;
  for (std::uint64_t i = 0; i < cap; ++i) {
    auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, size));
    if (p == nullptr) break;
    if (!heap.claim(p, size, static_cast<std::uint16_t>(thread + 1))) {
      overlap = true;
      continue;
    }
    block b{p, size, static_cast<unsigned char>(i * 13 + thread)};
    fill(b);
    got.push_back(b);
  }
  return got;
}

inline bool release_all(test_heap& heap, std::vector<block>& blocks, bool shuffle, int seed) {
  bool ok = true;
  rng r(seed);
  if (shuffle)
    for (std::size_t i = blocks.size(); i > 1; --i) std::swap(blocks[i - 1], blocks[r.below(i)]);
  for (const block& b : blocks) {
    ok &= intact(b);
    heap.release(b.p, b.size);
    gpualloc::heap_free(heap.get(), b.p);
  }
  blocks.clear();
  return ok;
}

// Runs body(lane, group) on every lane of `warp`, each a thread, all active
// together (group: lane_group::coalesced()).
template <class Body>
void on_lanes(gpualloc::detail::host_warp& warp, Body body) {
  std::vector<std::thread> lanes;
  for (unsigned l = 0; l < warp.lanes(); ++l)
    lanes.emplace_back([&, l] {
      const gpualloc::detail::host_warp::lane me(warp, l);
      const gpualloc::detail::host_warp::active together(warp.all_lanes());
      body(l, gpualloc::detail::lane_group::coalesced());
    });
  for (auto& t : lanes) t.join();
}

// The tests of the other files, run for each selected strategy (stress.cpp's main).
void test_host_warp(const options& o);                        // warp_tests.cpp: the emulation itself, once
void test_warps(const strategy_info& s, const options& o);    // warp_tests.cpp
int warp_demo(std::string_view which);                        // warp_tests.cpp: --warp-demo
void test_faults(const strategy_info& s, const options& o);   // fault_tests.cpp
void test_churn(const strategy_info& s, const options& o);    // fault_tests.cpp

}  // namespace stress
