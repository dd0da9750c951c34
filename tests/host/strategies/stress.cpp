// Host stress test of every registered strategy's core, with CPU threads in
// place of GPU lanes. Built plainly and with -fsanitize=thread; TSan then
// checks that the strategies' atomics order every hand-over of memory from
// one owner to the next. This file: the tests where each thread is a warp of
// one lane, and main; warp_tests.cpp: threads as lanes of emulated warps;
// fault_tests.cpp: regression tests of known faults, and a near-full churn;
// harness.h: what they share.
//
// Once: the warp emulation itself (warp_tests.cpp). For each strategy
// (iterating the registry, so new ones are picked up):
//  basic       one thread: sizes 0 B .. 9000 B are 16-byte aligned, hold a
//              pattern in every byte; impossible requests return NULL;
//  stress      8 threads, rounds of: allocate mixed sizes (1 B .. 9000 B),
//              fill every byte with the owner's pattern, free a random half,
//              allocate more, verify everything, free all. A shadow map of
//              16-byte granules (relaxed atomics: they add no happens-before
//              edges that could hide a missing one in the allocator) catches
//              two live blocks overlapping. Threads run their rounds without
//              barriers, except for `unsafe` strategies, whose promise only
//              holds while a round's blocks fit the heap;
//  exhaustion  one thread, then all threads: allocate until NULL, verify,
//              free, again. Expectations come from the registry's
//              reuse_policy: none: still full after the frees; unsafe: never
//              NULL; full: at least 90% as much again;
//  pressure    the same stress on a 256 KiB heap (full-reuse strategies):
//              requests fail now and then, blocks still never overlap;
//  largest     the largest request a fresh heap serves (binary search); 16 B
//              more returns NULL and leaves the heap working;
//  20 GiB      (plain build) a lazily committed 20 GiB heap: blocks past 8 GiB;
//  checked     the same stress with the tracking header (stats + checked
//              mode): counters balance, a double free is caught;
//  red zones   checked mode: writes just past or before a block are counted
//              once each at its free, frees of pointers into or between
//              blocks are refused, and the heap keeps serving; then threads
//              overflow at random and the count matches theirs;
//  quarantine  checked mode: writes after free and double frees found,
//              failing allocations drain it;
//  read check  checked mode: reads after free and of red zones found,
//              reads of live blocks holding the patterns not;
//  warps, churn, faults: warp_tests.cpp, fault_tests.cpp.
// The `cuda` strategy forwards to the C library on the host; it runs as a
// sanity check of the harness (no shadow map, no exhaustion).
//
// Usage: gpualloc-strategy-stress [--strategy NAME]... [--rounds N] [--threads N] [--heap MiB] [--steps N]
//        gpualloc-strategy-stress --warp-demo divergence|disagreement|unordered   (see warp_tests.cpp)
#include "harness.h"  // first: see there

#include <sys/mman.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <cinttypes>

#include "gpualloc/read_check.h"

#if HOST_TEST_TSAN
// Any race report fails the run, and goes to stdout, where lit shows it
// (harness.h: stderr holds the tests' details and provoked reports); the
// `cuda` strategy hands impossible requests to the C library, which must
// answer NULL, not abort.
extern "C" const char* __tsan_default_options() {
  return "halt_on_error=1:allocator_may_return_null=1:log_path=stdout";
}
#endif

namespace {

using namespace stress;

void test_basic(const strategy_info& s, test_heap& heap) {
  heap_header* h = heap.get();
  const bool libc = s.id == strategy_id::cuda;
  for (std::uint64_t size : {0, 1, 15, 16, 17, 100, 1000, 4096, 8192, 9000}) {
    auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, size));
    if (p == nullptr) {
      FAIL("%.*s basic: malloc(%" PRIu64 ") returned NULL", (int)s.name.size(), s.name.data(), size);
      continue;
    }
    if (!aligned(p)) FAIL("%.*s basic: malloc(%" PRIu64 ") = %p is not 16-byte aligned", (int)s.name.size(), s.name.data(), size, (void*)p);
    block b{p, size == 0 ? 1 : size, 0x5a};
    fill(b);
    if (!intact(b)) FAIL("%.*s basic: pattern lost", (int)s.name.size(), s.name.data());
    gpualloc::heap_free(h, p);
  }
  gpualloc::heap_free(h, nullptr);
}

// Last on a heap: a failed request may use up an `atomic` heap for good.
void test_oversize(const strategy_info& s, test_heap& heap) {
  heap_header* h = heap.get();
  const bool libc = s.id == strategy_id::cuda;
  if (gpualloc::heap_malloc(h, gpualloc::impossible_request) != nullptr)
    FAIL("%.*s basic: malloc(impossible_request) did not return NULL", (int)s.name.size(), s.name.data());
  if (gpualloc::heap_malloc(h, ~std::uint64_t{0}) != nullptr)
    FAIL("%.*s basic: malloc(SIZE_MAX) did not return NULL", (int)s.name.size(), s.name.data());
  if (!libc && gpualloc::heap_malloc(h, heap.arena_bytes() + 1) != nullptr)
    FAIL("%.*s basic: malloc(arena bytes + 1) did not return NULL", (int)s.name.size(), s.name.data());
}

// The largest request a fresh heap serves (binary search, a fresh heap per
// probe); then, on one heap: it succeeds, 16 B more returns NULL, and the
// heap still serves mixed requests afterwards.
void test_largest(const strategy_info& s, std::uint64_t heap_bytes) {
  auto serves = [&](std::uint64_t size) {
    test_heap heap(s.id, heap_bytes, 0, 1);
    void* p = gpualloc::heap_malloc(heap.get(), size);
    if (p != nullptr) {
      if (!aligned(p) || !heap.get()->space.contains(p) ||
          static_cast<std::byte*>(p) + size > heap.get()->space.begin + heap.arena_bytes())
        FAIL("%.*s largest: a %" PRIu64 " B block lies outside the arena", (int)s.name.size(), s.name.data(), size);
      std::memset(p, 0x3c, size);
    }
    return p != nullptr;
  };
  std::uint64_t lo = 16, hi = heap_bytes;  // serves lo, not hi
  if (!serves(lo) || serves(hi)) {
    FAIL("%.*s largest: cannot bracket the largest request", (int)s.name.size(), s.name.data());
    return;
  }
  while (hi - lo > 16) {
    std::uint64_t mid = (lo + hi) / 2 / 16 * 16;
    (serves(mid) ? lo : hi) = mid;
  }
  test_heap heap(s.id, heap_bytes, 0, 1);
  heap_header* h = heap.get();
  void* big = gpualloc::heap_malloc(h, lo);
  if (big == nullptr) FAIL("%.*s largest: %" PRIu64 " B served once, not again", (int)s.name.size(), s.name.data(), lo);
  gpualloc::heap_free(h, big);
  if (gpualloc::heap_malloc(h, lo + 16) != nullptr && s.reuse != reuse_policy::unsafe)
    FAIL("%.*s largest: %" PRIu64 " B served after all", (int)s.name.size(), s.name.data(), lo + 16);
  std::uint64_t served = 0;
  rng r(5);
  for (int i = 0; i < 1000; ++i) {
    void* p = gpualloc::heap_malloc(h, request_size(r));
    served += p != nullptr;
    if (i % 2) gpualloc::heap_free(h, p);
  }
  if (s.reuse != reuse_policy::none && served != 1000)
    FAIL("%.*s largest: after an oversize request, %" PRIu64 " of 1000 requests served", (int)s.name.size(),
         s.name.data(), served);
  note("  largest request: %" PRIu64 " B (%.1f%% of the arena)\n", lo, 100.0 * lo / heap.arena_bytes());
}

// A 20 GiB heap (untouched pages of an mmap; plain build only): 16 MiB
// blocks, touched at both ends only, reach past 8 GiB, stay disjoint and
// hold their bytes, and come back after free. (In a binary-heap pre-split
// large blocks fit only the upper levels: 16 MiB fits levels 0-6 of 20 GiB.)
void test_big_heap(const strategy_info& s) {
  const std::uint64_t bytes = std::uint64_t{20} << 30, block_bytes = std::uint64_t{16} << 20;
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (memory == MAP_FAILED) {
    note("  20 GiB heap: no address space, skipped\n");
    return;
  }
  auto* h = new (memory) heap_header{};
  h->strategy = static_cast<std::uint32_t>(s.id);
  h->heap_bytes = bytes;
  gpualloc::lay_out_heap(h, bytes, true);
  initialise(h, 4);
  auto mark = [](unsigned char* p, std::uint64_t n, unsigned char v) {
    std::memset(p, v, 64);
    std::memset(p + n - 64, v, 64);
  };
  auto marked = [](const unsigned char* p, std::uint64_t n, unsigned char v) {
    for (int i = 0; i < 64; ++i)
      if (p[i] != v || p[n - 64 + i] != v) return false;
    return true;
  };
  std::uint64_t counts[2] = {}, highest = 0;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<unsigned char*> got;
    const std::uint64_t cap = s.reuse == reuse_policy::unsafe ? bytes / block_bytes - 2 : bytes / block_bytes + 8;
    for (std::uint64_t i = 0; i < cap; ++i) {
      auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, block_bytes));
      if (p == nullptr) break;
      if (!aligned(p) || !h->space.contains(p) || reinterpret_cast<std::byte*>(p) + block_bytes > h->space.begin + h->space.bytes)
        FAIL("%.*s 20 GiB heap: block %p outside the arena", (int)s.name.size(), s.name.data(), (void*)p);
      mark(p, block_bytes, static_cast<unsigned char>(i));
      got.push_back(p);
      highest = std::max<std::uint64_t>(highest, p + block_bytes - reinterpret_cast<unsigned char*>(h->space.begin));
    }
    std::vector<unsigned char*> sorted = got;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i)
      if (sorted[i] < sorted[i - 1] + block_bytes)
        FAIL("%.*s 20 GiB heap: blocks overlap", (int)s.name.size(), s.name.data());
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!marked(got[i], block_bytes, static_cast<unsigned char>(i)))
        FAIL("%.*s 20 GiB heap: block %zu overwritten", (int)s.name.size(), s.name.data(), i);
      gpualloc::heap_free(h, got[i]);
    }
    counts[pass] = got.size();
  }
  munmap(memory, bytes);
  note("  20 GiB heap: %" PRIu64 " then %" PRIu64 " blocks of 16 MiB, up to %.2f GiB into the arena\n", counts[0],
       counts[1], highest / double(1u << 30));
  if (highest <= (std::uint64_t{8} << 30)) FAIL("%.*s 20 GiB heap: never got past 8 GiB", (int)s.name.size(), s.name.data());
  if (s.reuse == reuse_policy::full && counts[1] < counts[0])
    FAIL("%.*s 20 GiB heap: %" PRIu64 " blocks, then only %" PRIu64, (int)s.name.size(), s.name.data(), counts[0], counts[1]);
}

struct stress_result {
  std::atomic<std::uint64_t> mallocs{0}, nulls{0};
};

// One thread's rounds. `sync` (unsafe strategies only) separates rounds.
void stress_thread(const strategy_info& s, test_heap& heap, int thread, int rounds, int per_round,
                   std::barrier<>* sync, stress_result& result) {
  heap_header* h = heap.get();
  rng r(thread * 7919 + 1);
  std::vector<block> live;
  std::uint64_t mallocs = 0, nulls = 0;
  const auto owner = static_cast<std::uint16_t>(thread + 1);
  auto allocate = [&](int n, int round) {
    for (int i = 0; i < n; ++i) {
      std::uint64_t size = request_size(r);
      auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, size));
      if (p == nullptr) {
        ++nulls;
        continue;
      }
      ++mallocs;
      if (!aligned(p)) FAIL("%.*s stress: %p not 16-byte aligned", (int)s.name.size(), s.name.data(), (void*)p);
      if (!heap.claim(p, size, owner)) {
        FAIL("%.*s stress: thread %d got [%p, +%" PRIu64 ") overlapping a live block", (int)s.name.size(),
             s.name.data(), thread, (void*)p, size);
        continue;  // do not write into someone else's block
      }
      block b{p, size, static_cast<unsigned char>(thread * 31 + round * 7 + i + 1)};
      fill(b);
      live.push_back(b);
    }
  };
  auto release = [&](const block& b) {
    if (!intact(b))
      FAIL("%.*s stress: thread %d's block [%p, +%" PRIu64 ") was overwritten", (int)s.name.size(), s.name.data(),
           thread, (void*)b.p, b.size);
    heap.release(b.p, b.size);
    gpualloc::heap_free(h, b.p);
  };
  for (int round = 0; round < rounds; ++round) {
    allocate(per_round, round);
    for (std::size_t i = 0; i < live.size();) {  // free a random half
      if (r.below(2)) {
        release(live[i]);
        live[i] = live.back();
        live.pop_back();
      } else {
        ++i;
      }
    }
    allocate(per_round / 2, round);
    for (const block& b : live) release(b);
    live.clear();
    if (sync) sync->arrive_and_wait();
  }
  result.mallocs += mallocs;
  result.nulls += nulls;
}

// `pressure`: the heap is small enough to run out now and then; NULL is allowed.
void test_stress(const strategy_info& s, test_heap& heap, const options& o, int rounds, const char* label,
                 bool pressure = false) {
  const int per_round = 48;
  stress_result result;
  std::barrier<> sync(o.threads);
  std::barrier<>* between = s.reuse == reuse_policy::unsafe ? &sync : nullptr;
  std::vector<std::thread> ts;
  for (int t = 0; t < o.threads; ++t)
    ts.emplace_back([&, t] { stress_thread(s, heap, t, rounds, per_round, between, result); });
  for (auto& t : ts) t.join();
  // The heap holds a few rounds' worth; only `none` (no reuse) may run out.
  if (s.reuse != reuse_policy::none && !pressure && result.nulls != 0)
    FAIL("%.*s %s: %" PRIu64 " of %" PRIu64 " requests returned NULL", (int)s.name.size(), s.name.data(), label,
         (std::uint64_t)result.nulls, (std::uint64_t)(result.nulls + result.mallocs));
  note("  %s: %d threads x %d rounds, %" PRIu64 " blocks, %" PRIu64 " NULL\n", label, o.threads, rounds,
       (std::uint64_t)result.mallocs, (std::uint64_t)result.nulls);
}

void test_exhaustion(const strategy_info& s, test_heap& heap, const options& o) {
  heap_header* h = heap.get();
  const std::uint64_t arena = heap.arena_bytes();
  const auto name = [&] { return std::string(s.name); };
  bool overlap = false;

  if (s.reuse == reuse_policy::unsafe) {  // a wrapping strategy never says NULL
    for (std::uint64_t size : {4096u, 9000u, 48u}) {
      std::uint64_t cap = 2 * arena / size, got = 0;
      for (std::uint64_t i = 0; i < cap; ++i) {
        void* p = gpualloc::heap_malloc(h, size);
        if (p == nullptr || !aligned(p) || !h->space.contains(p) ||
            static_cast<std::byte*>(p) + size > h->space.begin + arena) {
          FAIL("%s exhaustion: request %" PRIu64 " of %" PRIu64 " B gave %p", name().c_str(), i, size, p);
          break;
        }
        gpualloc::heap_free(h, p);
        ++got;
      }
      note("  exhaustion: %" PRIu64 " blocks of %" PRIu64 " B (%.1fx the arena), no NULL\n", got, size,
           double(got * size) / arena);
    }
    return;
  }

  // One thread: 4 KiB blocks until NULL, twice; then 64 B, then 9000 B blocks.
  const std::uint64_t cap = arena / 16 + 16;
  std::vector<block> first = exhaust(h, heap, 4096, cap, 0, overlap);
  const std::uint64_t n1 = first.size();
  if (n1 == cap) FAIL("%s exhaustion: never ran out", name().c_str());
  if (!release_all(heap, first, true, 1)) FAIL("%s exhaustion: a 4 KiB block was overwritten", name().c_str());
  std::vector<block> second = exhaust(h, heap, 4096, cap, 0, overlap);
  const std::uint64_t n2 = second.size();
  if (!release_all(heap, second, true, 2)) FAIL("%s exhaustion: a 4 KiB block was overwritten", name().c_str());
  std::vector<block> small = exhaust(h, heap, 64, cap, 0, overlap);
  const std::uint64_t n3 = small.size();
  if (!release_all(heap, small, true, 3)) FAIL("%s exhaustion: a 64 B block was overwritten", name().c_str());
  std::vector<block> large = exhaust(h, heap, 9000, cap, 0, overlap);
  const std::uint64_t n4 = large.size();
  if (!release_all(heap, large, false, 4)) FAIL("%s exhaustion: a 9000 B block was overwritten", name().c_str());
  if (overlap) FAIL("%s exhaustion: blocks overlap", name().c_str());
  note("  exhaustion, 1 thread: 4 KiB x %" PRIu64 " (%.1f%% of the arena), again x %" PRIu64
       "; 64 B x %" PRIu64 " (%.1f%%); 9000 B x %" PRIu64 " (%.1f%%)\n",
       n1, 100.0 * n1 * 4096 / arena, n2, n3, 100.0 * n3 * 64 / arena, n4, 100.0 * n4 * 9000 / arena);
  if (s.reuse == reuse_policy::none) {
    if (n2 != 0 || n3 != 0 || n4 != 0) FAIL("%s exhaustion: memory reused by a strategy that never reuses", name().c_str());
    return;
  }
  if (n1 == 0 || n2 < n1 * 9 / 10) FAIL("%s exhaustion: %" PRIu64 " then %" PRIu64 " blocks", name().c_str(), n1, n2);
  if (n3 < n1) FAIL("%s exhaustion: only %" PRIu64 " 64 B blocks after freeing", name().c_str(), n3);
  // 9000 B blocks need the 64 B blocks' chunks merged again.
  if (n4 == 0 || n4 * 9000 < n1 * 4096 * 8 / 10)
    FAIL("%s exhaustion: only %" PRIu64 " 9000 B blocks after freeing small ones", name().c_str(), n4);

  // All threads at once, three cycles, each thread one size. A size-class
  // allocator (Ouroboros' pages) may round a request up to a power of two:
  // that waste is its design, memory stranded by concurrency is not. So the
  // blocks must cover 70% of the arena as requested, or 90% counted at their
  // power-of-two class.
  std::uint64_t totals[3] = {}, class_totals[3] = {};  // bytes
  for (int cycle = 0; cycle < 3; ++cycle) {
    std::atomic<std::uint64_t> total{0}, class_total{0};
    std::atomic<bool> bad{false};
    std::barrier<> full(o.threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < o.threads; ++t)
      ts.emplace_back([&, t, cycle] {
        bool over = false;
        rng r(t + 100 * cycle);
        const std::uint64_t size = 256 + 16 * r.below(256);
        std::vector<block> mine = exhaust(h, heap, size, cap, t, over);
        total += mine.size() * size;
        class_total += mine.size() * std::bit_ceil(size);
        full.arrive_and_wait();
        if (over || !release_all(heap, mine, true, t)) bad = true;
      });
    for (auto& t : ts) t.join();
    totals[cycle] = total;
    class_totals[cycle] = class_total;
    if (bad) FAIL("%s exhaustion, %d threads: blocks overlap or were overwritten", name().c_str(), o.threads);
  }
  note("  exhaustion, %d threads (each until its first NULL, 256-4336 B): %.1f%%, %.1f%%, %.1f%% of the arena"
       " (%.1f%%, %.1f%%, %.1f%% at power-of-two classes)\n",
       o.threads, 100.0 * totals[0] / arena, 100.0 * totals[1] / arena, 100.0 * totals[2] / arena,
       100.0 * class_totals[0] / arena, 100.0 * class_totals[1] / arena, 100.0 * class_totals[2] / arena);
  for (int cycle = 0; cycle < 3; ++cycle)
    if (totals[cycle] < arena * 7 / 10 && class_totals[cycle] < arena * 9 / 10)
      FAIL("%s exhaustion, threads: less than 70%% of the arena allocated (90%% at power-of-two classes)",
           name().c_str());
}

void test_checked(const strategy_info& s, const options& o, std::uint64_t heap_bytes) {
  test_heap heap(s.id, heap_bytes, gpualloc::heap_flag_stats | gpualloc::heap_flag_checked, 3);
  const gpualloc::heap_counters& c = heap.get()->counters;
  if (s.id != strategy_id::cuda) {  // a second free of libc memory is undefined
    void* p = gpualloc::heap_malloc(heap.get(), 100);
    gpualloc::heap_free(heap.get(), p);
    std::fprintf(stderr, "  (expect one reported double free:)\n");
    gpualloc::heap_free(heap.get(), p);
    if (p == nullptr || c.double_frees != 1)
      FAIL("%.*s checked: a double free went unnoticed", (int)s.name.size(), s.name.data());
    const_cast<gpualloc::heap_counters&>(c).double_frees = 0;
  }
  test_stress(s, heap, o, o.rounds / 4 + 1, "stress, checked mode");
  if (c.mallocs != c.frees || c.bytes_in_use != 0 || c.double_frees != 0 || c.foreign_frees != 0)
    FAIL("%.*s checked: counters mallocs %" PRIu64 " frees %" PRIu64 " in use %" PRIu64 " double %" PRIu64
         " foreign %" PRIu64,
         (int)s.name.size(), s.name.data(), c.mallocs, c.frees, c.bytes_in_use, c.double_frees, c.foreign_frees);
}

// o.threads threads at once, each `rounds` times: a block of 1 ..
// most_bytes bytes from h (a NULL is skipped), handed to
// use(block, size, random bits, round), then freed. `seed` times the
// thread's number + 1 seeds the thread's random bits.
template <class Use>
void churn_blocks(heap_header* h, const options& o, std::uint64_t seed, int rounds, std::uint64_t most_bytes,
                  const Use& use) {
  std::vector<std::thread> ts;
  for (int t = 0; t < o.threads; ++t)
    ts.emplace_back([=, &use] {
      std::uint64_t x = seed * (t + 1);
      for (int i = 0; i < rounds; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const std::uint64_t size = 1 + (x >> 33) % most_bytes;
        auto* b = static_cast<unsigned char*>(gpualloc::heap_malloc(h, size));
        if (b == nullptr) continue;
        use(b, size, x, i);
        gpualloc::heap_free(h, b);
      }
    });
  for (auto& t : ts) t.join();
}

// One overflow into a red zone (checked.h), seen at the free.
struct stray_write {
  std::uint64_t size;  // of the block
  std::int64_t at;     // first byte written, from the program's pointer
  int bytes;           // bytes written
  int counted;         // overflows the free must count
};

void test_red_zones(const strategy_info& s, const options& o, std::uint64_t heap_bytes) {
  test_heap heap(s.id, heap_bytes, gpualloc::heap_flag_checked, 3);
  heap_header* h = heap.get();
  const gpualloc::heap_counters& c = h->counters;
  const auto name = [&] { return std::string(s.name); };
  const stray_write writes[] = {
      {15, 15, 1, 1},   // one byte past a 15-byte block: into its slack
      {16, 16, 8, 1},   // eight past a 16-byte block
      {16, -1, 1, 1},   // one before
      {100, -16, 16, 1},  // the whole front zone
      {64, 79, 1, 1},   // the back zone's last byte
      {40, -4, 48, 2},  // both ends
      {40, 0, 40, 0},   // the block itself: nothing
  };
  std::fprintf(stderr, "  (expect reported overflows, underflows and bad frees:)\n");
  for (const stray_write& w : writes) {
    const std::uint64_t before = c.overflows;
    auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, w.size));
    if (p == nullptr) {
      FAIL("%s red zones: malloc(%" PRIu64 ") returned NULL", name().c_str(), w.size);
      continue;
    }
    std::memset(p + w.at, 0x5a, static_cast<std::size_t>(w.bytes));
    gpualloc::heap_free(h, p);
    if (c.overflows - before != static_cast<std::uint64_t>(w.counted))
      FAIL("%s red zones: %d byte(s) written at %" PRId64 " of a %" PRIu64 "-byte block counted %" PRIu64 " times, not %d",
           name().c_str(), w.bytes, w.at, w.size, c.overflows - before, w.counted);
  }
  // Pointers that are not a block's start: refused, counted, the block intact.
  auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, 64));
  auto* q = static_cast<unsigned char*>(gpualloc::heap_malloc(h, 64));
  if (p != nullptr && q != nullptr) {
    gpualloc::heap_free(h, p + 16);  // into the block
    gpualloc::heap_free(h, p + 96);  // past its back zone
    if (c.foreign_frees != 2) FAIL("%s red zones: %" PRIu64 " of 2 bad frees counted", name().c_str(), c.foreign_frees);
  }
  gpualloc::heap_free(h, p);
  gpualloc::heap_free(h, q);
  if (c.double_frees != 0 || c.mallocs != c.frees)
    FAIL("%s red zones: counters double %" PRIu64 " mallocs %" PRIu64 " frees %" PRIu64, name().c_str(), c.double_frees,
         c.mallocs, c.frees);

  // Threads overflow by one byte now and then; the count is theirs.
  const std::uint64_t base = c.overflows;
  std::atomic<std::uint64_t> written{0};
  churn_blocks(h, o, 0x9e3779b97f4a7c15ull, 400, 300, [&](unsigned char* b, std::uint64_t size, std::uint64_t x, int) {
    std::memset(b, 0x33, size);
    if ((x >> 20) % 8 == 0) b[size] = 0x33, ++written;
  });
  if (c.overflows - base != written.load())
    FAIL("%s red zones, %d threads: %" PRIu64 " overflows counted, %" PRIu64 " made", name().c_str(), o.threads,
         c.overflows - base, written.load());
  note("  red zones: %zu stray writes, 2 bad frees, %" PRIu64 " overflows from %d threads\n",
       std::size(writes), written.load(), o.threads);
}

// Checked mode's quarantine (quarantine.h): a write into a freed block is
// counted when the block leaves the quarantine, a second free is a double
// free however many blocks were served in between, an allocation that
// fails drains the quarantine and retries, and threads that free far more
// blocks than it holds push each other's blocks out without a false report.
void test_quarantine(const strategy_info& s, const options& o) {
  const auto name = [&] { return std::string(s.name); };
  test_heap heap(s.id, 32u << 20, gpualloc::heap_flag_checked, 3);  // a ring of 4,096 blocks
  heap_header* h = heap.get();
  const gpualloc::heap_counters& c = h->counters;
  const std::uint64_t slots = h->checks.quarantine_slots;

  std::fprintf(stderr, "  (expect a reported use after free and a double free:)\n");
  auto* p = static_cast<int*>(gpualloc::heap_malloc(h, 32));
  auto* q = static_cast<int*>(gpualloc::heap_malloc(h, 48));
  if (p == nullptr || q == nullptr) return FAIL("%s quarantine: no first blocks", name().c_str());
  gpualloc::heap_free(h, p);
  gpualloc::heap_free(h, q);
  if (p[0] != static_cast<int>(0xfdfdfdfd)) FAIL("%s quarantine: a freed block is not poisoned", name().c_str());
  if (s.id != strategy_id::cuda) {  // a request larger than the arena fails at once: a drain cannot help it
    const std::uint64_t drains = h->checks.quarantine_drained;
    if (gpualloc::heap_malloc(h, h->space.bytes + 1) != nullptr || h->checks.quarantine_drained != drains)
      FAIL("%s quarantine: a request larger than the arena drained the ring", name().c_str());
  }
  p[1] = 5;  // a use after free, seen when p leaves
  // slots - 2 more frees: p and q stay, and none of their memory is handed out meanwhile.
  for (std::uint64_t i = 0; i < slots - 2; ++i) {
    void* b = gpualloc::heap_malloc(h, 16 + i % 64);
    if (b == p || b == q) FAIL("%s quarantine: a quarantined block was handed out", name().c_str());
    gpualloc::heap_free(h, b);
  }
  gpualloc::heap_free(h, q);  // twice, thousands of blocks later
  if (c.double_frees != 1) FAIL("%s quarantine: %" PRIu64 " double frees counted, 1 made", name().c_str(), c.double_frees);
  if (c.use_after_frees != 0) FAIL("%s quarantine: a use after free counted before its block left", name().c_str());
  gpualloc::heap_free(h, gpualloc::heap_malloc(h, 16));  // pushes p out
  if (c.use_after_frees != 1) FAIL("%s quarantine: %" PRIu64 " uses after free counted, 1 made", name().c_str(), c.use_after_frees);

  if (s.reuse == reuse_policy::full && s.id != strategy_id::cuda) {
    // Fill, free everything (the quarantine keeps up to `slots` blocks), fill again: the drain gives them back.
    std::size_t first_fill = 0;
    for (int round = 0; round < 2; ++round) {
      std::vector<void*> got;
      for (void* b; (b = gpualloc::heap_malloc(h, 256)) != nullptr;) got.push_back(b);
      if (round == 0) first_fill = got.size();
      if (round == 1 && got.size() < first_fill * 9 / 10)
        FAIL("%s quarantine: a full heap held %zu blocks, after freeing them %zu", name().c_str(), first_fill, got.size());
      for (void* b : got) gpualloc::heap_free(h, b);
    }
  }

  const std::uint64_t reports = c.use_after_frees + c.double_frees + c.foreign_frees + c.overflows;
  churn_blocks(h, o, 0x2545f4914f6cdd1dull, 1500, 500,
               [](unsigned char* b, std::uint64_t size, std::uint64_t, int) { std::memset(b, 0x44, size); });
  if (c.use_after_frees + c.double_frees + c.foreign_frees + c.overflows != reports || c.mallocs != c.frees)
    FAIL("%s quarantine, %d threads: reports of a program without bugs, or mallocs %" PRIu64 " != frees %" PRIu64,
         name().c_str(), o.threads, c.mallocs, c.frees);
  note("  quarantine: %" PRIu64 " slots, a use after free and a double free found, %d threads clean\n", slots,
       o.threads);
}

// Checked mode's read check (read_check.h), as code compiled with
// --gpualloc-check-reads calls it: a read of a quarantined block and reads
// of a live block's zones are counted once per block and kind; reads of a
// block's own bytes are not, also when they hold the poison; then threads
// that check reads of their live blocks, filled with poison and zone
// bytes, while the others free and reuse theirs, see no report.
void test_read_check(const strategy_info& s, const options& o) {
  const auto name = [&] { return std::string(s.name); };
  test_heap heap(s.id, 32u << 20, gpualloc::heap_flag_checked, 3);
  heap_header* h = heap.get();
  const gpualloc::heap_counters& c = h->counters;
  // As __gpualloc_check_read calls it for a strategy with an arena.
  const auto check_read = [h](const void* p, std::uint64_t n) { gpualloc::checked::check_read(h, h->space, p, n); };

  std::fprintf(stderr, "  (expect a reported read after free, read overflow and read underflow:)\n");
  auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, 40));
  auto* q = static_cast<unsigned char*>(gpualloc::heap_malloc(h, 20));
  if (p == nullptr || q == nullptr) return FAIL("%s read check: no first blocks", name().c_str());
  std::memset(p, gpualloc::checked::freed_byte, 40);
  check_read(p, 8);
  check_read(p + 32, 8);
  if (c.use_after_frees + c.overflows != 0) FAIL("%s read check: a read of a live block's bytes was reported", name().c_str());
  check_read(q + 20, 4);   // the slack: past the 20 bytes asked for
  check_read(q + 32, 8);   // the back zone: the same block and kind
  check_read(q - 16, 16);  // the front zone
  if (c.overflows != 2) FAIL("%s read check: %" PRIu64 " zone reads counted, 2 kinds made", name().c_str(), c.overflows);
  gpualloc::heap_free(h, p);
  check_read(p + 16, 4);
  check_read(p, 16);
  if (c.use_after_frees != 1) FAIL("%s read check: %" PRIu64 " reads after free counted, 1 block", name().c_str(), c.use_after_frees);
  gpualloc::heap_free(h, q);

  const std::uint64_t reports = c.use_after_frees + c.overflows;
  churn_blocks(h, o, 0x9e3779b97f4a7c15ull, 1500, 700,
               [&](unsigned char* b, std::uint64_t size, std::uint64_t x, int i) {
                 std::memset(b, i % 2 ? gpualloc::checked::freed_byte : gpualloc::checked::zone_byte, size);
                 check_read(b + (x >> 12) % size, 1);
                 check_read(b, size < 16 ? size : 16);
               });
  if (c.use_after_frees + c.overflows != reports || c.mallocs != c.frees)
    FAIL("%s read check, %d threads: reports of a program without bugs, or mallocs %" PRIu64 " != frees %" PRIu64,
         name().c_str(), o.threads, c.mallocs, c.frees);
  note("  read check: a read after free and zone reads found, %d threads clean\n", o.threads);
}

bool selected(const options& o, std::string_view name) {
  if (o.only.empty()) return true;
  for (const std::string& n : o.only)
    if (n == name) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--strategy") {
      o.only.emplace_back(value());
      if (!gpualloc::find_strategy(o.only.back())) {
        std::fprintf(stderr, "unknown strategy %s\n", o.only.back().c_str());
        return 2;
      }
    } else if (a == "--rounds") {
      o.rounds = std::atoi(value());
    } else if (a == "--threads") {
      o.threads = std::atoi(value());
    } else if (a == "--heap") {
      o.heap_mib = std::strtoull(value(), nullptr, 10);
    } else if (a == "--steps") {
      o.steps = std::atoi(value());
    } else if (a == "--warp-demo") {
      return warp_demo(value());
    } else {
      std::fprintf(stderr,
                   "usage: %s [--strategy NAME]... [--rounds N] [--threads N] [--heap MiB] [--steps N]\n"
                   "       %s --warp-demo divergence|disagreement|unordered\n",
                   argv[0], argv[0]);
      return 2;
    }
  }
  const std::uint64_t heap_bytes = o.heap_mib << 20;
  std::printf("gpualloc strategy stress%s: %d threads, %d rounds, %d warp steps, %" PRIu64 " MiB heaps\n",
              HOST_TEST_TSAN ? " (TSan)" : "", o.threads, o.rounds, o.steps, o.heap_mib);
  test_host_warp(o);
  int tested = 0;
  for (const strategy_info& s : gpualloc::strategy_table) {
    if (!selected(o, s.name)) continue;
    const int before = failures.load();
    std::printf("%.*s (reuse %.*s)\n", (int)s.name.size(), s.name.data(), (int)reuse_policy_name(s.reuse).size(),
                reuse_policy_name(s.reuse).data());
    std::fflush(stdout);
    {
      test_heap heap(s.id, heap_bytes, 0, 3);
      test_basic(s, heap);
      test_stress(s, heap, o, o.rounds, "stress");
      test_oversize(s, heap);
    }
    if (s.reuse == reuse_policy::full && s.id != strategy_id::cuda) {
      // The threads' live peak (~250 KB) about fills it: walks run out, merge and lap concurrently.
      test_heap small(s.id, 256u << 10, 0, 3);
      test_stress(s, small, o, o.rounds / 2, "stress, 256 KiB heap", true);
    }
    if (s.id != strategy_id::cuda) {
      test_heap fresh(s.id, heap_bytes, 0, 3);
      test_exhaustion(s, fresh, o);
      test_largest(s, heap_bytes);
      if (!HOST_TEST_TSAN) test_big_heap(s);
    }
    test_checked(s, o, heap_bytes);
    test_red_zones(s, o, heap_bytes);
    if (s.reuse != reuse_policy::unsafe) test_quarantine(s, o);  // wrapping over freed blocks "writes" them
    if (s.id != strategy_id::cuda && s.reuse != reuse_policy::unsafe) test_read_check(s, o);  // cuda: outside the arena
    test_warps(s, o);
    test_churn(s, o);
    test_faults(s, o);
    std::printf("%.*s: %s\n", (int)s.name.size(), s.name.data(), failures.load() == before ? "ok" : "FAILED");
    std::fflush(stdout);
    ++tested;
  }
  std::printf("%d strategies, %d failures\n", tested, failures.load());
  return failures.load() == 0 && tested > 0 ? 0 : 1;
}
