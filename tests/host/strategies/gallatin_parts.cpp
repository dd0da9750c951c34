// Host tests of Gallatin's building blocks, and its utilisation figures.
//
//  tree          the 64-ary bit tree (detail/bit_tree.h) against a model, one
//                thread: insert, remove, next, claim_first, claim_last_run,
//                insert_run, in trees of one to three levels
//  tree race     threads take indices (claim_first) and runs (claim_last_run)
//                and put them back: no index is held twice, and afterwards
//                every index is back and every summary bit is right
//  layout        plans for heaps of 4 KiB .. 80 GiB and 1 .. 256 SMs: tables
//                in order inside the arena, segments and blocks as promised
//  segments      threads take and give back blocks of every size straight
//                from the segment table (formats, drains, reclaims racing):
//                no page in two blocks, every segment reclaimed at the end
//  large         threads allocate and free 16 B .. 4 segments at once (runs
//                of slices, whole blocks, runs of segments): disjoint, intact,
//                and afterwards the whole arena is one free run again
//  utilisation   (--report) the share of a 16 MiB heap handed out until the
//                first NULL, fresh, in single sizes; and under churn: the
//                largest live share a heap keeps serving while threads free a
//                random block and allocate another, round after round
//  churn band    (--churn-band T, alone) the GPU conformance suite's churn
//                phase on CPU threads for several promises (registry: churn;
//                --promise P picks them), T times the GPU kernel's
//                operations: the NULLs per promise
//
// Usage: gpualloc-gallatin-parts [--report] [--turnovers N] [--churn-band T [--promise P]...]
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <thread>
#include <vector>

#include "gpualloc/allocate.h"
#include "gpualloc/detail/bit_tree.h"
#include "gpualloc/dispatch.h"
#include "gpualloc/strategies/gallatin/layout.h"
#include "host_test.h"
#include "utilisation.h"

#if HOST_TEST_TSAN
// Any race report fails the run.
extern "C" const char* __tsan_default_options() { return "halt_on_error=1"; }
#endif

namespace {

using gpualloc::detail::bit_tree;
using gpualloc::detail::bit_tree_layout;

using host_test::failures;

using host_test::rng;

// A tree's words, initialised as the strategy's init does.
struct tree_store {
  bit_tree_layout layout;
  std::vector<std::uint64_t> words;
  tree_store(std::uint64_t universe, bool full) : layout(bit_tree_layout::make(universe)), words(layout.words) {
    for (std::uint64_t w = 0; w < layout.words; ++w) words[w] = layout.initial_word(w, full);
  }
  bit_tree tree() { return bit_tree(words.data(), layout); }

  // Every summary bit says whether its word is non-empty (at rest).
  bool summaries_right() const {
    for (std::uint32_t l = 0; l + 1 < layout.levels; ++l)
      for (std::uint64_t b = 0; b < layout.bits[l]; ++b) {
        const bool bit = words[layout.first_word[l] + b / 64] >> (b % 64) & 1u;
        if (bit != (words[layout.first_word[l + 1] + b] != 0)) return false;
      }
    return true;
  }
};

std::uint64_t model_next(const std::vector<bool>& m, std::uint64_t from) {
  for (std::uint64_t i = from; i < m.size(); ++i)
    if (m[i]) return i;
  return bit_tree::none;
}

std::uint64_t model_last_run(const std::vector<bool>& m, std::uint64_t count) {
  std::uint64_t run = 0;
  for (std::uint64_t i = m.size(); i-- > 0;) {
    run = m[i] ? run + 1 : 0;
    if (run == count) return i;
  }
  return bit_tree::none;
}

void test_tree_model() {
  for (std::uint64_t universe : {1ull, 63ull, 64ull, 65ull, 200ull, 4096ull, 4097ull, 70000ull}) {
    for (bool full : {false, true}) {
      tree_store store(universe, full);
      const bit_tree t = store.tree();
      std::vector<bool> model(universe, full);
      rng r(universe * 2 + full);
      const int ops = universe > 5000 ? 20000 : 4000;
      for (int op = 0; op < ops; ++op) {
        const std::uint64_t i = r.below(universe);
        switch (r.below(6)) {
          case 0:
            if (!model[i]) t.insert(i), model[i] = true;
            break;
          case 1:
            CHECK(t.remove(i) == model[i], "tree %" PRIu64 ": remove(%" PRIu64 ") disagrees", universe, i);
            model[i] = false;
            break;
          case 2:
            CHECK(t.next(i) == model_next(model, i), "tree %" PRIu64 ": next(%" PRIu64 ") disagrees", universe, i);
            break;
          case 3: {
            const std::uint64_t got = t.claim_first(), want = model_next(model, 0);
            CHECK(got == want, "tree %" PRIu64 ": claim_first %" PRIu64 ", model %" PRIu64, universe, got, want);
            if (want != bit_tree::none) model[want] = false;
            break;
          }
          case 4: {
            const std::uint64_t count = 1 + r.below(std::min<std::uint64_t>(universe, 150));
            const std::uint64_t got = t.claim_last_run(count), want = model_last_run(model, count);
            CHECK(got == want, "tree %" PRIu64 ": claim_last_run(%" PRIu64 ") %" PRIu64 ", model %" PRIu64, universe,
                  count, got, want);
            if (want != bit_tree::none)
              for (std::uint64_t k = 0; k < count; ++k) model[want + k] = false;
            break;
          }
          case 5: {
            const std::uint64_t count = 1 + r.below(std::min<std::uint64_t>(universe - i, 130));
            bool absent = true;
            for (std::uint64_t k = 0; k < count; ++k) absent &= !model[i + k];
            if (absent) {
              t.insert_run(i, count);
              for (std::uint64_t k = 0; k < count; ++k) model[i + k] = true;
            }
            break;
          }
        }
      }
      CHECK(store.summaries_right(), "tree %" PRIu64 ": summaries wrong after the model test", universe);
    }
  }
  std::printf("tree: model test ok over universes 1 .. 70000 (1-3 levels)\n");
}

// Threads take single indices and runs and give them back; `owner` catches an index held twice.
void test_tree_race(int threads, int rounds) {
  for (std::uint64_t universe : {100ull, 5000ull}) {
    tree_store store(universe, true);
    const bit_tree t = store.tree();
    std::vector<std::atomic<int>> owner(universe);
    std::atomic<int> twice{0};
    std::vector<std::thread> ts;
    for (int id = 1; id <= threads; ++id)
      ts.emplace_back([&, id] {
        rng r(id);
        std::vector<std::pair<std::uint64_t, std::uint64_t>> held;  // first, count
        for (int round = 0; round < rounds; ++round) {
          const bool run = r.below(4) == 0;
          const std::uint64_t count = run ? 2 + r.below(70) : 1;
          const std::uint64_t first = run ? t.claim_last_run(count) : t.claim_first();
          if (first != bit_tree::none) {
            for (std::uint64_t k = 0; k < count; ++k) {
              int expected = 0;
              if (!owner[first + k].compare_exchange_strong(expected, id, std::memory_order_relaxed)) ++twice;
            }
            held.emplace_back(first, count);
          }
          if (held.size() > 4 || (first == bit_tree::none && !held.empty())) {
            const std::size_t pick = r.below(held.size());
            const auto [f, c] = held[pick];
            for (std::uint64_t k = 0; k < c; ++k) owner[f + k].store(0, std::memory_order_relaxed);
            if (c == 1)
              t.insert(f);
            else
              t.insert_run(f, c);
            held[pick] = held.back();
            held.pop_back();
          }
        }
        for (const auto& [f, c] : held) {
          for (std::uint64_t k = 0; k < c; ++k) owner[f + k].store(0, std::memory_order_relaxed);
          t.insert_run(f, c);
        }
      });
    for (auto& th : ts) th.join();
    CHECK(twice == 0, "tree race %" PRIu64 ": %d indices held twice", universe, twice.load());
    std::uint64_t present = 0;
    for (std::uint64_t i = 0; i < universe; ++i)
      present += store.words[store.layout.first_word[store.layout.levels - 1] + i / 64] >> (i % 64) & 1u;
    CHECK(present == universe, "tree race %" PRIu64 ": %" PRIu64 " indices back", universe, present);
    CHECK(store.summaries_right(), "tree race %" PRIu64 ": summaries wrong at rest", universe);
  }
  std::printf("tree race: %d threads x %d rounds of claims and runs, no index twice, all back\n", threads, rounds);
}

void test_layouts() {
  using gpualloc::gallatin_parts::layout;
  int checked = 0;
  for (std::uint64_t bytes :
       {4096ull, 100000ull, 256ull << 10, 16ull << 20, 1ull << 30, 4ull << 30, 20ull << 30, 80ull << 30})
    for (std::uint32_t sms : {1u, 16u, 132u, 256u}) {
      const layout L = layout::make(bytes, sms);
      ++checked;
      if (L.segments == 0) {  // a heap too small for one segment: tables (if any) inside it, malloc says NULL
        CHECK(bytes < (64u << 10) && L.data_offset <= bytes, "layout %" PRIu64 " B: no segments", bytes);
        continue;
      }
      const std::uint64_t S = L.segment_bytes();
      CHECK(L.data_offset + L.segments * S <= bytes, "layout %" PRIu64 " B: data past the arena", bytes);
      CHECK(L.kinds_offset < L.headers_offset && L.headers_offset < L.cells_offset &&
                L.cells_offset < L.counters_offset && L.counters_offset < L.slots_offset &&
                L.slots_offset <= L.flags_offset && L.flags_offset < L.trees_offset && L.trees_offset < L.data_offset,
            "layout %" PRIu64 " B: tables out of order", bytes);
      CHECK(S <= (16u << 20) && S >= 4096, "layout %" PRIu64 " B: segment of %" PRIu64 " B", bytes, S);
      if (bytes >= (1u << 20)) CHECK(L.segments >= 16, "layout %" PRIu64 " B: only %u segments", bytes, L.segments);
      if (bytes >= (1ull << 30)) CHECK(S == (16u << 20), "layout %" PRIu64 " B: segments of %" PRIu64 " B", bytes, S);
      std::uint64_t buffered = 0;
      for (const auto& c : L.cls) {
        CHECK(c.block_log2 <= L.segment_log2 && c.block_log2 >= L.min_block_log2, "layout %" PRIu64 " B: block size",
              bytes);
        CHECK(((c.slot_mask + 1) & c.slot_mask) == 0 && c.slot_mask < sms, "layout %" PRIu64 " B: slots", bytes);
        buffered += std::uint64_t{c.slot_mask + 1u} << c.block_log2;
      }
      CHECK(buffered <= bytes / 8 || L.slot_count == gpualloc::gallatin_parts::classes,
            "layout %" PRIu64 " B, %u SMs: buffers may hold %" PRIu64 " B", bytes, sms, buffered);
      CHECK(L.trees >= 1 && L.trees <= gpualloc::gallatin_parts::max_trees, "layout %" PRIu64 " B: %u trees", bytes,
            L.trees);
    }
  std::printf("layout: %d plans of 4 KiB .. 80 GiB heaps on 1 .. 256 SMs consistent\n", checked);
}

// ---- the strategy on a heap --------------------------------------------------

// A heap in lazily committed host memory, planned for `sms` SMs.
// A Gallatin heap (utilisation.h).
struct heap : utilisation::heap {
  explicit heap(std::uint64_t bytes, std::uint32_t sms = gpualloc::detail::host_sm_count)
      : utilisation::heap(gpualloc::strategy_id::gallatin, bytes, sms) {}
};

// Threads allocate and free blocks of 16 B .. 4 segments at once
// (runs of slices, whole blocks, runs of segments): no two live blocks
// overlap, none loses its bytes, and every byte comes back.
void test_large(int threads, int rounds) {
  heap H(16u << 20);
  const auto& L = gpualloc::state_of<gpualloc::strategies::gallatin::state>(H.get()).L;
  const std::uint64_t S = L.segment_bytes(), granules = H.get()->space.bytes / 16;
  std::vector<std::atomic<std::uint8_t>> shadow(granules);
  std::atomic<int> overlaps{0}, corrupt{0};
  std::atomic<std::uint64_t> served{0}, nulls{0};
  auto granule = [&](const void* p) { return (static_cast<const std::byte*>(p) - H.get()->space.begin) / 16; };
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      rng r(t + 7);
      std::vector<std::pair<unsigned char*, std::uint64_t>> live;
      for (int round = 0; round < rounds; ++round) {
        const std::uint64_t size = 16 * (1 + r.below(4 * S / 16));
        auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(H.get(), size));
        if (p == nullptr) {
          ++nulls;
        } else {
          ++served;
          bool clash = false;
          for (std::uint64_t g = granule(p); g < granule(p) + (size + 15) / 16; ++g) {
            std::uint8_t free_granule = 0;
            clash |= !shadow[g].compare_exchange_strong(free_granule, 1, std::memory_order_relaxed);
          }
          if (clash) ++overlaps;
          std::memset(p, t + 1, 64);
          std::memset(p + size - 64, t + 1, 64);
          live.emplace_back(p, size);
        }
        if (live.size() > 3 || (p == nullptr && !live.empty())) {
          const std::size_t pick = r.below(live.size());
          auto [q, n] = live[pick];
          for (int i = 0; i < 64; ++i) corrupt += q[i] != t + 1 || q[n - 64 + i] != t + 1;
          for (std::uint64_t g = granule(q); g < granule(q) + (n + 15) / 16; ++g)
            shadow[g].store(0, std::memory_order_relaxed);
          gpualloc::heap_free(H.get(), q);
          live[pick] = live.back();
          live.pop_back();
        }
      }
      for (auto [q, n] : live) {
        for (std::uint64_t g = granule(q); g < granule(q) + (n + 15) / 16; ++g)
          shadow[g].store(0, std::memory_order_relaxed);
        gpualloc::heap_free(H.get(), q);
      }
    });
  for (auto& th : ts) th.join();
  CHECK(overlaps == 0, "large: %d blocks overlapped a live one", overlaps.load());
  CHECK(corrupt == 0, "large: %d bytes overwritten", corrupt.load());
  // Everything came back: every segment is free but those holding a block
  // buffer's current block (which stay installed).
  const std::byte* arena = H.get()->space.begin;
  const auto* kinds = reinterpret_cast<const std::uint32_t*>(arena + L.kinds_offset);
  const auto* slots = reinterpret_cast<const std::uint64_t*>(arena + L.slots_offset);
  std::vector<bool> installed(L.segments);
  for (std::uint64_t i = 0; i < L.slot_count; ++i) {
    const auto ref = static_cast<std::uint32_t>(slots[i]);
    if (ref != 0 && ref != ~0u) installed[(ref - 1) >> L.entries_log2] = true;
  }
  std::uint32_t held = 0;
  for (std::uint32_t seg = 0; seg < L.segments; ++seg) held += kinds[seg] != 0 && !installed[seg];
  CHECK(held == 0, "large: %u segments neither free nor holding an installed block", held);
  std::printf("large: %d threads x %d blocks of 16 B .. %" PRIu64 " KiB (%" PRIu64 " served, %" PRIu64
              " NULL), disjoint, all back\n",
              threads, rounds, 4 * S >> 10, served.load(), nulls.load());
}

// Threads take blocks of every size straight from the segment table and give
// them back, so segments are formatted, drained, reclaimed and formatted for
// other sizes all the time: no byte is in two blocks at once, and at the end
// every segment is back in the segment tree.
void test_segments(int threads, int rounds) {
  using namespace gpualloc::gallatin_parts;
  heap H(4u << 20);
  const layout& L = gpualloc::state_of<gpualloc::strategies::gallatin::state>(H.get()).L;
  const segment_table T(L, H.get()->space.begin);
  const std::uint64_t pages = (std::uint64_t{L.segments} << L.segment_log2) / 4096;
  std::vector<std::atomic<std::uint8_t>> shadow(pages);
  std::atomic<int> twice{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      rng r(t + 11);
      struct held {
        std::uint32_t block, j;
      };
      std::vector<held> mine;
      auto pages_of = [&](const held& h) {
        const std::uint64_t first = ((std::uint64_t{h.block >> L.entries_log2} << L.segment_log2) +
                                     (std::uint64_t{h.block & ((1u << L.entries_log2) - 1)} << h.j)) /
                                    4096;
        return std::pair{first, first + (std::uint64_t{1} << h.j) / 4096};
      };
      for (int round = 0; round < rounds; ++round) {
        const std::uint32_t j = L.min_block_log2 + static_cast<std::uint32_t>(r.below(L.trees));
        const std::uint32_t block = T.get_block(j);
        if (block != no_block) {
          const held h{block, j};
          auto [lo, hi] = pages_of(h);
          for (std::uint64_t p = lo; p < hi; ++p) twice += shadow[p].exchange(1, std::memory_order_relaxed);
          mine.push_back(h);
        }
        if (mine.size() > 2 || (block == no_block && !mine.empty())) {
          const std::size_t pick = r.below(mine.size());
          auto [lo, hi] = pages_of(mine[pick]);
          for (std::uint64_t p = lo; p < hi; ++p) shadow[p].store(0, std::memory_order_relaxed);
          const std::uint32_t seg = mine[pick].block >> L.entries_log2;
          T.return_block(seg, mine[pick].j, mine[pick].block & ((1u << L.entries_log2) - 1));
          mine[pick] = mine.back();
          mine.pop_back();
        }
      }
      for (const held& h : mine) {
        auto [lo, hi] = pages_of(h);
        for (std::uint64_t p = lo; p < hi; ++p) shadow[p].store(0, std::memory_order_relaxed);
        T.return_block(h.block >> L.entries_log2, h.j, h.block & ((1u << L.entries_log2) - 1));
      }
    });
  for (auto& th : ts) th.join();
  CHECK(twice == 0, "segments: %d pages handed out twice", twice.load());
  const auto* kinds = reinterpret_cast<const std::uint32_t*>(H.get()->space.begin + L.kinds_offset);
  std::uint32_t formatted = 0;
  for (std::uint32_t seg = 0; seg < L.segments; ++seg) formatted += kinds[seg] != kind_free;
  CHECK(formatted == 0, "segments: %u segments still formatted with every block back", formatted);
  std::printf("segments: %d threads x %d blocks of %u sizes taken and given back, disjoint, every segment reclaimed\n",
              threads, rounds, L.trees);
}

}  // namespace

int main(int argc, char** argv) {
  utilisation::options o;
  if (!o.parse(argc, argv)) return 2;
  if (o.churn_band_turnovers > 0) {
    utilisation::churn_band_report(gpualloc::strategy_id::gallatin, o.churn_band_turnovers, o.promises);
    return 0;
  }
  test_tree_model();
#if HOST_TEST_TSAN
  const int scale = 4;  // TSan runs ~10x slower
#else
  const int scale = 1;
#endif
  test_tree_race(8, 20000 / scale);
  test_layouts();
  test_segments(16, 20000 / scale);
  test_large(8, 3000 / scale);
  if (o.report) utilisation::report(gpualloc::strategy_id::gallatin, o.turnovers);
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
