// Regression tests of faults found by reading the strategies, each forcing
// its fault deterministically, and a near-full churn for every strategy.
//
//  double free  (circular family, no checked mode) a second free of a block
//               whose chunk is free, or was merged into the chunk before it
//               (its header dead, locked for good: the free used to wait on
//               it forever), or stays locked by a thread that never lets go:
//               each is reported, frees nothing and returns; the heap works on.
//  cursor race  (circular family) a walk enters a segment at its cursor, a
//               used chunk, and passes used chunk X; X is freed (it lies above
//               the cursor, so the free does not lower it); the walk takes a
//               chunk beyond X and advances the cursor. The strategies' test
//               hook (harness.h) runs the free inside that window. X must not
//               be lost: an exhaustion hands it out again.
//  full heap    (atomic) requests retried on a full heap, by one thread and by
//               a warp, leave the bump pointer where it is; a pointer 64 KiB
//               short of 2^64 (as after that many bytes of failed requests)
//               hands out nothing instead of wrapping into live memory.
//  churn        (every strategy that reuses memory) threads allocate and free
//               16 B - 1 KiB blocks at random, each holding its share of the
//               heap between 80% and 95% of what an exhaustion in these sizes
//               got (until 64 NULLs in a row); patterns and the shadow map are
//               checked. Afterwards, all freed, an exhaustion gets at least 90%
//               as much as before.
#include "harness.h"  // first: see there

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <functional>
#include <future>
#include <type_traits>

#include "gpualloc/detail/chunk_header.h"
#include "gpualloc/strategies/atomic.h"
#include "gpualloc/strategies/circular.h"

namespace {

// Run once by this thread's next circular take, inside the window (harness.h).
thread_local std::function<void()> in_next_take;

}  // namespace

void circular_take_hook() {
  if (!in_next_take) return;
  const std::function<void()> f = std::move(in_next_take);
  in_next_take = nullptr;
  f();
}

namespace stress {
namespace {

using gpualloc::strategies::atomic_bump;
using gpualloc::strategies::circular;

// Runs `body` on its own thread; if it has not returned after ten minutes
// it hangs: the test fails and the program ends. Not one: a free that gives
// up on a chunk held for good (test_double_free) yields the core between
// its 2^20 tries, which takes 0.5 s under TSan on an idle machine, and a
// yield waits for the other runnable threads on a loaded one (CI: two
// cores, two lit workers), where cfmalloc's went past a minute.
void without_hang(const strategy_info& s, const char* what, const std::function<void()>& body) {
  std::promise<void> done;
  std::future<void> returned = done.get_future();
  std::thread t([&] {
    body();
    done.set_value();
  });
  if (returned.wait_for(std::chrono::minutes(10)) != std::future_status::ready) {
    FAIL("%.*s %s: hangs", NAME(s), what);
    std::fflush(stdout);
    std::_Exit(1);
  }
  t.join();
}

// Blocks of `size` bytes until NULL (claimed in the shadow map), then all freed; the blocks' addresses.
std::vector<void*> addresses_until_null(test_heap& heap, std::uint64_t size, bool& overlap) {
  std::vector<block> got = exhaust(heap.get(), heap, size, heap.arena_bytes() / 16, 0, overlap);
  std::vector<void*> at;
  for (const block& b : got) at.push_back(b.p);
  if (!release_all(heap, got, false, 0)) overlap = true;
  return at;
}

template <class Header, bool Multi>
void test_double_free(const strategy_info& s, circular<Header, Multi>*) {
  test_heap heap(s.id, 1u << 20, 0, 1);
  heap_header* h = heap.get();
  without_hang(s, "double free", [&] {
    auto* a = static_cast<unsigned char*>(gpualloc::heap_malloc(h, 64));
    auto* b = static_cast<unsigned char*>(gpualloc::heap_malloc(h, 64));
    auto* c = static_cast<unsigned char*>(gpualloc::heap_malloc(h, 64));
    if (a == nullptr || b != a + 80 || c != b + 80) {
      FAIL("%.*s double free: three 64 B blocks not one after another", NAME(s));
      return;
    }
    const block live{c, 64, 0x6c};
    fill(live);
    heap.claim(c, 64, 1);
    gpualloc::heap_free(h, b);
    gpualloc::heap_free(h, a);  // absorbs b: b's header is dead, locked for good
    std::fprintf(stderr, "  (expect three reported frees that free nothing:)\n");
    gpualloc::heap_free(h, b);  // waited forever before
    gpualloc::heap_free(h, a);  // a's chunk is free
    // A chunk that a thread holds and never lets go (c's own lock, taken here).
    auto* header = reinterpret_cast<Header*>(c - sizeof(Header));
    gpualloc::detail::chunk_view held;
    if (!Header::try_lock(header, held)) FAIL("%.*s double free: cannot lock a used chunk", NAME(s));
    const auto start = std::chrono::steady_clock::now();
    gpualloc::heap_free(h, c);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Header::unlock(header, held, held);
    if (!intact(live)) FAIL("%.*s double free: a live block was overwritten", NAME(s));
    // The heap works on: c is still in use, everything else comes back.
    bool overlap = false;
    const std::vector<void*> blocks = addresses_until_null(heap, 64, overlap);
    if (overlap || !intact(live)) FAIL("%.*s double free: afterwards blocks overlap or were overwritten", NAME(s));
    heap.release(c, 64);
    gpualloc::heap_free(h, c);
    note("  double free: of a free chunk, of a merged chunk, of a chunk held for good (given up after %.2f s): "
         "none freed anything; then %zu blocks of 64 B\n",
         waited, blocks.size());
  });
}

template <class Header, bool Multi>
void test_cursor_race(const strategy_info& s, circular<Header, Multi>*) {
  test_heap heap(s.id, 256u << 10, 0, 1);
  heap_header* h = heap.get();
  without_hang(s, "cursor race", [&] {
    unsigned char* a[4];
    for (auto*& p : a) p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, 64));
    if (a[0] == nullptr || a[1] != a[0] + 80 || a[2] != a[1] + 80 || a[3] != a[2] + 80) {
      FAIL("%.*s cursor race: four 64 B blocks not one after another", NAME(s));
      return;
    }
    gpualloc::heap_free(h, a[1]);  // lowers the cursor to a1
    void* b = gpualloc::heap_malloc(h, 64);  // a1 again, whole: the cursor names a used chunk
    if (b != a[1]) {
      FAIL("%.*s cursor race: a freed chunk is not taken again first", NAME(s));
      return;
    }
    in_next_take = [&] { gpualloc::heap_free(h, a[2]); };
    void* c = gpualloc::heap_malloc(h, 1000);  // from a1 past a2, a3 to the rest; a2 freed before the cursor moves
    if (in_next_take || c <= a[3]) {
      in_next_take = nullptr;
      FAIL("%.*s cursor race: the walk did not go as planned", NAME(s));
      return;
    }
    bool overlap = false;
    const std::vector<void*> blocks = addresses_until_null(heap, 64, overlap);
    const bool found = std::find(blocks.begin(), blocks.end(), a[2]) != blocks.end();
    if (!found)
      FAIL("%.*s cursor race: a chunk freed behind a walk is lost (the walk advanced the cursor over it): "
           "%zu blocks of 64 B, none at %p",
           NAME(s), blocks.size(), (void*)a[2]);
    if (overlap) FAIL("%.*s cursor race: blocks overlap", NAME(s));
    for (void* p : {(void*)a[0], b, (void*)a[3], c}) gpualloc::heap_free(h, p);
    note("  cursor race: a chunk freed inside a walk's window %s\n", found ? "is handed out again" : "is LOST");
  });
}

void test_full_heap(const strategy_info& s) {
  test_heap heap(s.id, 1u << 20, 0, 1);
  heap_header* h = heap.get();
  std::uint64_t& next = gpualloc::state_of<atomic_bump::state>(h).next;
  while (gpualloc::heap_malloc(h, 4096) != nullptr) {
  }
  const std::uint64_t full = next;
  for (int i = 0; i < 100000; ++i)
    if (gpualloc::heap_malloc(h, 4096) != nullptr) FAIL("%.*s full heap: a block from a full heap", NAME(s));
  if (next != full)
    FAIL("%.*s full heap: 100000 failed requests moved the bump pointer by %" PRIu64 " B", NAME(s), next - full);

  // A warp retrying: 32 lanes, 1000 requests each.
  gpualloc::detail::host_warp warp(32);
  std::atomic<int> served{0};
  on_lanes(warp, [&](unsigned lane, const gpualloc::detail::lane_group&) {
    for (int i = 0; i < 1000; ++i) served += gpualloc::heap_malloc(h, 64 + 16 * lane) != nullptr;
  });
  if (served != 0 || next != full)
    FAIL("%.*s full heap: a warp's 32000 failed requests served %d and moved the pointer by %" PRIu64 " B", NAME(s),
         served.load(), next - full);

  // As if concurrent failed requests had pushed the pointer past 2^62: the
  // next failed request brings it back to the end instead of toward a wrap.
  next = (std::uint64_t{1} << 62) + (64u << 10);
  void* first = gpualloc::heap_malloc(h, 128u << 10);
  void* second = gpualloc::heap_malloc(h, 64);
  if (first != nullptr || second != nullptr)
    FAIL("%.*s full heap: a runaway bump pointer handed out %p and %p (live memory)", NAME(s), first, second);
  if (next >= (std::uint64_t{1} << 62))
    FAIL("%.*s full heap: a runaway bump pointer (%" PRIu64 ") was not brought back to the end", NAME(s), next);
  note("  full heap: 132000 failed requests left the bump pointer at %" PRIu64 " B (arena %" PRIu64 " B)\n",
       full, heap.arena_bytes());
}

template <class S>
constexpr bool is_circular = false;
template <class Header, bool Multi>
constexpr bool is_circular<circular<Header, Multi>> = true;

template <class S>
void test_faults_of(const strategy_info& s, S*) {
  if constexpr (is_circular<S>) {
    test_double_free(s, static_cast<S*>(nullptr));
    test_cursor_race(s, static_cast<S*>(nullptr));
  } else if constexpr (std::is_same_v<S, atomic_bump>) {
    test_full_heap(s);
  }
}

// 16 B to 1 KiB.
std::uint64_t churn_size(rng& r) { return 16 * (1 + r.below(64)); }

// Bytes of 16 B - 1 KiB blocks one thread gets until 64 NULLs in a row (all
// freed again): a size-class allocator may say NULL for one size and still
// hold others.
std::uint64_t churn_capacity(test_heap& heap, bool& bad) {
  rng r(3);
  std::vector<block> got;
  std::uint64_t bytes = 0;
  for (int nulls = 0; nulls < 64;) {
    const std::uint64_t size = churn_size(r);
    auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(heap.get(), size));
    nulls = p == nullptr ? nulls + 1 : 0;
    if (p == nullptr) continue;
    if (!heap.claim(p, size, 1)) {
      bad = true;
      break;
    }
    got.push_back(block{p, size, static_cast<unsigned char>(got.size())});
    fill(got.back());
    bytes += size;
  }
  if (!release_all(heap, got, true, 4)) bad = true;
  return bytes;
}

}  // namespace

void test_faults(const strategy_info& s, const options&) {
  gpualloc::visit_strategy(s.id, [&](auto tag) {
    using S = typename decltype(tag)::type;
    test_faults_of(s, static_cast<S*>(nullptr));
  });
}

void test_churn(const strategy_info& s, const options& o) {
  if (s.reuse != reuse_policy::full || s.id == strategy_id::cuda) return;
  const auto start = std::chrono::steady_clock::now();
  test_heap heap(s.id, 2u << 20, 0, 3);
  bool bad = false;
  const std::uint64_t capacity = churn_capacity(heap, bad);
  if (capacity == 0) {
    note("  churn: the 2 MiB heap holds no 16 B - 1 KiB block; skipped\n");
    return;
  }
  const std::uint64_t low = capacity * 80 / 100 / o.threads, high = capacity * 95 / 100 / o.threads;
  const int ops = o.rounds * 50;
  std::atomic<std::uint64_t> nulls{0}, frees{0};
  std::atomic<bool> overwritten{false}, overlap{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t)
    threads.emplace_back([&, t] {
      rng r(t + 11);
      std::vector<block> live;
      std::uint64_t bytes = 0;
      for (int i = 0; i < ops; ++i) {
        if (bytes < low || (bytes < high && r.below(2) == 0)) {
          const std::uint64_t size = churn_size(r);
          auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(heap.get(), size));
          if (p == nullptr) {
            ++nulls;
            continue;
          }
          if (!heap.claim(p, size, static_cast<std::uint16_t>(t + 1))) {
            overlap = true;
            continue;
          }
          live.push_back(block{p, size, static_cast<unsigned char>(t * 37 + i)});
          fill(live.back());
          bytes += size;
        } else if (!live.empty()) {
          const std::size_t k = r.below(live.size());
          const block b = live[k];
          live[k] = live.back();
          live.pop_back();
          if (!intact(b)) overwritten = true;
          heap.release(b.p, b.size);
          gpualloc::heap_free(heap.get(), b.p);
          bytes -= b.size;
          ++frees;
        }
      }
      std::vector<block> rest = live;
      if (!release_all(heap, rest, false, 0)) overwritten = true;
    });
  for (auto& t : threads) t.join();
  const std::uint64_t after = churn_capacity(heap, bad);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  note("  churn: %d threads x %d operations at 80-95%% of %" PRIu64 " B (%.0f%% of the arena): %" PRIu64
       " frees, %" PRIu64 " NULL; then %" PRIu64 " B again (%.2f s)\n",
       o.threads, ops, capacity, 100.0 * capacity / heap.arena_bytes(), (std::uint64_t)frees,
       (std::uint64_t)nulls, after, seconds);
  if (bad || overlap) FAIL("%.*s churn: blocks overlap", NAME(s));
  if (overwritten) FAIL("%.*s churn: a block was overwritten", NAME(s));
  if (after < capacity * 9 / 10)
    FAIL("%.*s churn: after churning the heap holds %" PRIu64 " B, before %" PRIu64 " B", NAME(s), after, capacity);
}

}  // namespace stress
