// The random-walk strategies (rw, rw-bm, corw, crw: random_walk/random_walk.h)
// on emulated warps of CPU threads (detail/host_warp.h), plain and under TSan.
// Three runs per strategy:
//
//  pages  full and partial warps (random masks; half of them through the
//         same-size entry) whose lanes all ask for one unit (256 B), write
//         and verify every byte, keep a few blocks and hand the others to
//         lanes of their own and of other warps to free. No barrier between
//         steps: a warp's lanes agree on each step's mask from a shared
//         seed, so steps overlap, and lanes are ordered only by the
//         allocator and the hand-overs. A lane that receives a unit another
//         lane claimed (CoRW's pooled walk, walks.h walk_pooled) must be
//         ordered after that claim's acquire, else TSan reports its writes
//         racing with the unit's previous owner (random_walk.h malloc_page:
//         g.sync() after the walk; without it this run fails under TSan).
//  mixed  the same with lanes of one call asking for small blocks (16-240 B,
//         packed into shared runs: run_tags.h), pages, runs (257 B - 8 KiB)
//         and now and then a run larger than a region (runs.h).
//  full   a nearly full heap: steps of mallocs only (the mixed kinds) and
//         steps of frees only, all warps in step, then pages and small blocks
//         until the heap's last units are taken. The heap at the end of a
//         malloc step has at most the room it had during the step, so a NULL
//         is explained only if the used bitmap has no free run of the units
//         its claim needed then (a small request: its share of its group's
//         packed run).
//
// After every step of `full`, and at the end of each run: the used bitmap is
// exactly the union of the live blocks' runs (as their tags name them), a
// shared run counts its live blocks, no LockMap bit is held. At the end,
// with nothing live, the whole pool is allocatable again: one block of every
// unit, then every unit as a page (a leaked unit or a stuck dry window fails).
// Throughout: 16-byte alignment, no two live blocks overlap (shadow map),
// every block keeps its pattern until freed. In `pages` and `mixed` a lane
// holds at most four blocks and one handed to it, and the heap is large
// enough for all of them (pages: a third of it; mixed: under half), so a NULL
// fails, except for runs larger than a region, which may find no gap between
// the scattered blocks (counted).
//
// Usage: gpualloc-random-walk-lanes [--strategy NAME]... [--run pages|mixed|full]... [--steps N] [--seed N]
#include "harness.h"  // first: see there

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cinttypes>
#include <map>

#include "gpualloc/strategies/random_walk/random_walk.h"

void circular_take_hook() {}
extern "C" const char* __tsan_default_options() { return "halt_on_error=1"; }

namespace {

using namespace stress;
using gpualloc::detail::host_warp;
using gpualloc::detail::unit_bitmap;
namespace rwp = gpualloc::random_walk_parts;

constexpr unsigned lanes_per_warp = 32;
constexpr std::uint64_t unit = rwp::default_unit_bytes;
constexpr std::uint64_t region_bytes = rwp::region_units * unit;

struct rw_strategy {
  const char* name;
  strategy_id id;
};
constexpr rw_strategy all_strategies[] = {
    {"rw", strategy_id::rw}, {"rw-bm", strategy_id::rw_bm}, {"corw", strategy_id::corw}, {"crw", strategy_id::crw}};

rwp::pool pool_of(test_heap& heap) {
  heap_header* h = heap.get();
  const auto& L = [&]() -> const rwp::layout& {
    namespace s = gpualloc::strategies;
    switch (static_cast<strategy_id>(h->strategy)) {
      case strategy_id::rw_bm: return gpualloc::state_of<s::rw_bm::state>(h).L;
      case strategy_id::corw: return gpualloc::state_of<s::corw::state>(h).L;
      case strategy_id::crw: return gpualloc::state_of<s::crw::state>(h).L;
      default: return gpualloc::state_of<s::rw::state>(h).L;
    }
  }();
  return rwp::pool{L, h->space.begin};
}

// What the front end hands the strategy for a request of `size` bytes (no tracking header).
std::uint64_t strategy_bytes(std::uint64_t size) { return gpualloc::round_up(size == 0 ? 1 : size, 16); }
std::uint64_t units_for(std::uint64_t bytes) { return (bytes + unit - 1) / unit; }

std::uint32_t load(std::uint32_t& word) { return gpualloc::detail::device_atomic<std::uint32_t>(word).load(gpualloc::detail::relaxed); }

bool used(const unit_bitmap& bm, std::uint64_t u) { return (bm.read(u / 32) >> (u % 32) & 1u) != 0; }

// Whether the used bitmap shows n consecutive free units.
bool has_free_run(const rwp::pool& P, std::uint64_t n) {
  const unit_bitmap bm = P.bitmap();
  std::uint64_t run = 0;
  for (std::uint64_t u = 0; u < P.L.units; ++u) {
    run = used(bm, u) ? 0 : run + 1;
    if (run >= n) return true;
  }
  return false;
}

// Adds to a counter the lanes share. Relaxed: a seq_cst increment would
// order each lane after every lane that counted before it, and TSan would no
// longer see a lane that is not ordered after a unit's previous owner.
std::uint64_t count(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
  return counter.fetch_add(n, std::memory_order_relaxed) + n;
}

host_test::rng seeded(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return host_test::rng(a * 0x100000001b3ull ^ b * 0x9e3779b97f4a7c15ull ^ c * 0xc2b2ae3d27d4eb4full);
}

// The lanes of a call: the full warp, random lanes, the first n, one or two.
unsigned random_mask(rng& r) {
  switch (r.below(4)) {
    case 0: return ~0u;
    case 1: {
      const auto m = static_cast<unsigned>(r.next());
      return m != 0 ? m : 1u;
    }
    case 2: {
      const auto n = static_cast<unsigned>(1 + r.below(lanes_per_warp));
      return n == lanes_per_warp ? ~0u : (1u << n) - 1;
    }
    default: return 1u << r.below(lanes_per_warp) | 1u << r.below(lanes_per_warp);
  }
}

// A request of one of the mixed kinds: small (16-240 B), a page, a run of
// 257 B - 8 KiB, or (when `huge`) a run of a region and up to 64 units more.
std::uint64_t mixed_size(rng& r, unsigned kind, bool huge) {
  if (huge) return region_bytes + 1 + r.below(64 * unit);
  switch (kind) {
    case 0: return 16 + r.below(225);
    case 1: return unit;
    default: return unit + 1 + r.below(8192 - unit);
  }
}

// A quiescent heap (no call in flight) against the blocks the test holds:
// every block lies in the run its tags name, a shared run counts exactly its
// live blocks, the used bitmap is exactly the union of those runs, and no
// LockMap bit is held. Reports the first few mismatches.
void check_quiescent(const rwp::pool& P, const std::vector<block>& live, const char* name, const char* when) {
  using tags = rwp::run_tags;
  const rwp::layout& L = P.L;
  int reported = 0;
  auto bad = [&](const char* what, std::uint64_t u) {
    if (reported++ < 5) FAIL("%s %s: unit %" PRIu64 ": %s", name, when, u, what);
  };
  std::vector<bool> in_run(L.units);
  std::map<std::uint64_t, std::uint32_t> shared_blocks;  // head -> live blocks of that shared run
  for (const block& b : live) {
    const std::uint64_t u = P.unit_of(b.p);
    std::uint64_t head = u;
    std::uint32_t tag = load(P.tags()[u]);
    if (tag & tags::link_flag) {
      head = u - (tag & ~tags::link_flag);
      tag = load(P.tags()[head]);
    }
    const bool shared = (tag & tags::shared_flag) != 0;
    std::uint64_t units = tag & tags::length_mask;
    if (!shared && units == 0 && head + 1 < L.units) units = load(P.tags()[head + 1]);
    if ((tag & tags::link_flag) || units == 0 || head + units > L.units) {
      bad("a live block's tags name no run", u);
      continue;
    }
    const auto* p = reinterpret_cast<const std::byte*>(b.p);
    if (p < P.unit(head) || p + strategy_bytes(b.size) > P.unit(head + units)) bad("a live block lies outside its run", u);
    if (shared) {
      ++shared_blocks[head];
    } else if (p != P.unit(head)) {
      bad("a block alone in its run does not start at the run's head", u);
    }
    for (std::uint64_t x = head; x < head + units; ++x) in_run[x] = true;
  }
  for (const auto& [head, blocks] : shared_blocks) {
    const std::uint32_t counted = load(P.tags()[head]) >> tags::live_shift & tags::live_mask;
    if (counted != blocks) bad("a shared run's live count differs from its live blocks", head);
  }
  const unit_bitmap bm = P.bitmap();
  for (std::uint64_t u = 0; u < L.units; ++u)
    if (used(bm, u) != in_run[u]) bad(in_run[u] ? "a unit of a live run is free" : "a used unit is in no live run", u);
  for (std::uint64_t w = 0; w < unit_bitmap::lock_words_for(L.units); ++w)
    if (load(bm.locks[w]) != 0) bad("a LockMap bit is held", w * 32 * 32);
}

// Nothing live: every unit free, no lock held, and the whole pool
// allocatable again, as one block and (`pages`) as a page per unit.
void check_refill(test_heap& heap, const char* name, bool pages) {
  const rwp::pool P = pool_of(heap);
  heap_header* h = heap.get();
  check_quiescent(P, {}, name, "at rest");
  void* whole = gpualloc::heap_malloc(h, P.L.units * unit);
  if (whole != P.unit(0)) FAIL("%s at rest: a block of all %" PRIu64 " units: %p, not the pool's start", name, P.L.units, whole);
  if (whole != nullptr) gpualloc::heap_free(h, whole);
  if (!pages) return;
  std::vector<block> got;
  for (std::uint64_t i = 0; i < P.L.units; ++i) {
    auto* p = static_cast<unsigned char*>(gpualloc::heap_malloc(h, unit));
    if (p == nullptr) {
      FAIL("%s at rest: NULL for page %" PRIu64 " of %" PRIu64, name, i, P.L.units);
      break;
    }
    if (!heap.claim(p, unit, 1)) FAIL("%s at rest: page %" PRIu64 " overlaps another", name, i);
    got.push_back(block{p, unit, static_cast<unsigned char>(i)});
  }
  if (void* extra = gpualloc::heap_malloc(h, 1)) {
    FAIL("%s at rest: %p from a pool whose every unit is a page", name, extra);
    gpualloc::heap_free(h, extra);
  }
  check_quiescent(P, got, name, "full of pages");
  for (const block& b : got) {
    heap.release(b.p, b.size);
    gpualloc::heap_free(h, b.p);
  }
  check_quiescent(P, {}, name, "at rest again");
}

// ---- pages and mixed: lanes that overlap freely ----

enum class mix : std::uint8_t { pages, mixed };

struct concurrent_run {
  concurrent_run(test_heap& heap, const char* name, mix what, unsigned warps, int steps, std::uint64_t seed)
      : heap(heap), P(pool_of(heap)), name(name), what(what), warps(warps), steps(steps), seed(seed),
        inbox(std::make_unique<std::atomic<std::uint64_t>[]>(warps * lanes_per_warp)) {
    for (unsigned w = 0; w < warps; ++w) warp.push_back(std::make_unique<host_warp>(lanes_per_warp));
  }

  test_heap& heap;
  const rwp::pool P;
  const char* name;
  const mix what;
  const unsigned warps;
  const int steps;
  const std::uint64_t seed;
  std::vector<std::unique_ptr<host_warp>> warp;
  std::unique_ptr<std::atomic<std::uint64_t>[]> inbox;  // per lane: a block handed to it to free (0: none)
  std::atomic<std::uint64_t> mallocs{0}, handed{0}, frees{0}, nulls{0}, huge{0}, huge_nulls{0}, overlaps{0},
      corrupt{0}, misaligned{0};
  std::atomic<std::uint64_t> units_held{0}, peak_units{0};  // the units of the blocks live (a small one: one unit)

  // A block in one word, for an inbox: its granule in the arena, size and pattern.
  std::uint64_t pack(const block& b) const {
    const auto granule = static_cast<std::uint64_t>(reinterpret_cast<std::byte*>(b.p) - heap.get()->space.begin) / 16;
    return 1 | std::uint64_t{b.pattern} << 1 | b.size << 9 | granule << 32;
  }
  block unpack(std::uint64_t v) const {
    return block{reinterpret_cast<unsigned char*>(heap.get()->space.begin + (v >> 32) * 16), v >> 9 & 0x7fffff,
                 static_cast<unsigned char>(v >> 1)};
  }

  void release(const block& b) {
    if (!intact(b) && count(corrupt) <= 5) FAIL("%s: block [%p, +%" PRIu64 ") overwritten before its free", name, b.p, b.size);
    heap.release(b.p, b.size);
    gpualloc::heap_free(heap.get(), b.p);
    units_held.fetch_sub(units_for(strategy_bytes(b.size)), std::memory_order_relaxed);
    count(frees);
  }

  void lane(unsigned w, unsigned l) {
    const host_warp::lane me(*warp[w], l);
    const unsigned self = w * lanes_per_warp + l;
    rng mine = seeded(seed, self, 1);  // how many blocks to keep, whom to hand the others to
    std::vector<block> own;
    for (int s = 0; s < steps; ++s) {
      if (const std::uint64_t v = inbox[self].exchange(0, std::memory_order_acquire)) release(unpack(v));
      rng plan = seeded(seed, w, s + 2);  // the same on every lane of the warp
      const unsigned mask = random_mask(plan);
      const bool same_size = what == mix::pages && plan.below(2) == 0;
      const auto theme = static_cast<unsigned>(plan.below(5));  // all small, all pages, or a kind per lane
      if (mask >> l & 1) {
        rng r = seeded(seed, self, s + 2);
        const auto kind = static_cast<unsigned>(theme < 2 ? theme : r.below(3));
        const bool big = what == mix::mixed && l % 16 == 0 && r.below(16) == 0;
        allocate(self, mask, what == mix::pages ? unit : mixed_size(r, kind, big), same_size, s, own);
      }
      for (const std::size_t keep = mine.below(4); own.size() > keep; own.erase(own.begin())) {
        const auto to = static_cast<unsigned>(mine.below(2) ? w * lanes_per_warp + (l + 1) % lanes_per_warp
                                                            : mine.below(warps * lanes_per_warp));
        std::uint64_t empty = 0;
        if (to != self && inbox[to].compare_exchange_strong(empty, pack(own.front()), std::memory_order_release,
                                                            std::memory_order_relaxed)) {
          count(handed);
        } else {
          release(own.front());
        }
      }
    }
    for (const block& b : own) release(b);
  }

  void allocate(unsigned self, unsigned mask, std::uint64_t size, bool same_size, int step, std::vector<block>& own) {
    heap_header* h = heap.get();
    const bool is_huge = size > region_bytes;
    count(huge, is_huge);
    void* p;
    {
      const host_warp::active together(mask);
      p = same_size ? gpualloc::heap_malloc(h, size, static_cast<strategy_id>(h->strategy), gpualloc::coalescing::same_size)
                    : gpualloc::heap_malloc(h, size);
    }
    if (p == nullptr) {
      const std::uint64_t seen = count(nulls);
      if (is_huge) {
        count(huge_nulls);
      } else if (seen <= 5) {
        FAIL("%s: lane %u (mask %08x): NULL for %" PRIu64 " B from a heap that has room", name, self, mask, size);
      }
      return;
    }
    count(mallocs);
    const std::uint64_t held = count(units_held, units_for(strategy_bytes(size)));
    for (std::uint64_t peak = peak_units.load(std::memory_order_relaxed);
         held > peak && !peak_units.compare_exchange_weak(peak, held, std::memory_order_relaxed);) {
    }
    if (!aligned(p)) count(misaligned);
    if (!heap.claim(p, size, static_cast<std::uint16_t>(self + 1))) {
      if (count(overlaps) <= 5) FAIL("%s: lane %u (mask %08x) got [%p, +%" PRIu64 ") overlapping a live block", name, self, mask, p, size);
      return;
    }
    const block b{static_cast<unsigned char*>(p), size, static_cast<unsigned char>(self * 31 + step * 7 + 1)};
    fill(b);
    if (!intact(b) && count(corrupt) <= 5) FAIL("%s: block [%p, +%" PRIu64 ") overwritten while its lane filled it", name, b.p, size);
    own.push_back(b);
  }

  void run() {
    std::vector<std::thread> lanes;
    for (unsigned w = 0; w < warps; ++w)
      for (unsigned l = 0; l < lanes_per_warp; ++l) lanes.emplace_back([this, w, l] { lane(w, l); });
    for (auto& t : lanes) t.join();
    for (unsigned i = 0; i < warps * lanes_per_warp; ++i)
      if (const std::uint64_t v = inbox[i].exchange(0)) release(unpack(v));
    if (misaligned) FAIL("%s: %" PRIu64 " blocks not 16-byte aligned", name, misaligned.load());
    if (frees != mallocs) FAIL("%s: %" PRIu64 " blocks, %" PRIu64 " freed", name, mallocs.load(), frees.load());
  }
};

void run_concurrent(const rw_strategy& s, mix what, std::uint64_t heap_bytes, unsigned warps, int steps, std::uint64_t seed) {
  const char* kind = what == mix::pages ? "pages" : "mixed";
  char name[64];
  std::snprintf(name, sizeof name, "%s %s", s.name, kind);
  test_heap heap(s.id, heap_bytes, 0, 2);
  concurrent_run run(heap, name, what, warps, steps, seed);
  const auto start = std::chrono::steady_clock::now();
  run.run();
  check_refill(heap, name, what == mix::pages);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %" PRIu64 " KiB heap (%" PRIu64 " units), %u warps x %d steps: %" PRIu64 " blocks (%" PRIu64
              " handed to another lane), at most %" PRIu64 " units held, %" PRIu64 " NULL (%" PRIu64 " of %" PRIu64
              " above a region), %" PRIu64 " overlaps, %" PRIu64 " overwritten (%.2f s)\n",
              name, heap_bytes >> 10, run.P.L.units, warps, steps, run.mallocs.load(), run.handed.load(),
              run.peak_units.load(), run.nulls.load(), run.huge_nulls.load(), run.huge.load(), run.overlaps.load(),
              run.corrupt.load(), seconds);
}

// ---- full: a nearly full heap, steps of mallocs only and of frees only ----

struct full_run {
  enum class step_kind : std::uint8_t { malloc, free, done };

  // Lane i's part of the current step.
  struct lane_task {
    unsigned mask = 0;        // malloc: the lanes calling with it (0: idle)
    std::uint64_t size = 0;   // malloc: bytes requested
    std::uint64_t need = 0;   // malloc: units its claim needs (a small request: its share of the group's run)
    unsigned char* got = nullptr;
    unsigned char pattern = 0;
    bool overlapped = false;
    std::vector<block> to_free;  // free: blocks (of any lane) it frees
  };

  full_run(test_heap& heap, const char* name, unsigned warps, int steps, std::uint64_t seed)
      : heap(heap), P(pool_of(heap)), name(name), warps(warps), steps(steps), r(seed), task(warps * lanes_per_warp) {
    for (unsigned w = 0; w < warps; ++w) warp.push_back(std::make_unique<host_warp>(lanes_per_warp));
  }

  test_heap& heap;
  const rwp::pool P;
  const char* name;
  const unsigned warps;
  const int steps;
  rng r;  // the planner's
  std::vector<lane_task> task;
  std::vector<std::unique_ptr<host_warp>> warp;
  std::vector<block> live;  // the planner's, between steps
  step_kind kind = step_kind::done;
  int step = 0;
  std::uint64_t mallocs = 0, frees = 0, overlaps = 0, unexplained = 0, peak_units = 0;
  std::uint64_t nulls[3] = {};  // small, page, run (explained)
  std::atomic<std::uint64_t> corrupt{0};

  // Between steps (the barrier's completion: every lane waits): take the
  // last step's results, check the heap, plan the next step. `steps` steps
  // of mallocs, every eighth of them a step that frees an eighth of the live
  // blocks; then malloc steps of pages or small blocks only, until one serves
  // nothing (the heap's last units taken); then every block freed.
  void next() {
    const bool served = kind == step_kind::malloc && collect();
    if (step > 0) {
      char when[48];
      std::snprintf(when, sizeof when, "after step %d", step - 1);
      check_quiescent(P, live, name, when);
    }
    const int s = step++;
    if (s < steps && s % 8 == 7) {
      free_some(8);
    } else if (s < steps || (s < steps + max_top_off && (s == steps || served))) {
      kind = step_kind::malloc;
      plan_mallocs(s >= steps);
    } else if (!live.empty()) {
      free_some(1);
    } else {
      kind = step_kind::done;
    }
  }

  static constexpr int max_top_off = 100;

  // A step that frees one in `one_in` live blocks, each by a random lane.
  void free_some(std::uint64_t one_in) {
    kind = step_kind::free;
    for (lane_task& t : task) t.to_free.clear();
    std::vector<block> keep;
    for (const block& b : live) (r.below(one_in) == 0 ? task[r.below(task.size())].to_free : keep).push_back(b);
    frees += live.size() - keep.size();
    live.swap(keep);
  }

  // Each warp's call: a mask and a size per lane. A CoRW page group that asks
  // for more units than the heap has walks all its max_walk_steps rounds
  // (seconds under the emulation, where a group operation costs tens of
  // microseconds), so when the step asks for more units than are free, the
  // page lanes of a call but its first call alone (as lanes of a divergent
  // branch would), each a group of one.
  void plan_mallocs(bool top_off) {
    std::uint64_t demand = 0;
    for (unsigned w = 0; w < warps; ++w) {
      lane_task* lanes = &task[w * lanes_per_warp];
      // Topping off: full warps, mostly pages (small blocks share units and fill slowly).
      const unsigned mask = top_off ? ~0u : random_mask(r);
      const auto theme = static_cast<unsigned>(top_off ? r.below(4) != 0 : r.below(5));  // all small, all pages, or a kind per lane
      for (unsigned l = 0; l < lanes_per_warp; ++l) {
        lane_task& t = lanes[l];
        t.mask = mask >> l & 1 ? mask : 0;
        t.got = nullptr;
        t.overlapped = false;
        t.size = mixed_size(r, theme < 2 ? theme : static_cast<unsigned>(r.below(3)), theme >= 2 && r.below(32) == 0);
      }
      demand += plan_needs(lanes);
    }
    std::uint64_t free_units = 0;
    const unit_bitmap bm = P.bitmap();
    for (std::uint64_t u = 0; u < P.L.units; ++u) free_units += !used(bm, u);
    if (demand <= free_units) return;
    for (unsigned w = 0; w < warps; ++w) {
      lane_task* lanes = &task[w * lanes_per_warp];
      unsigned pages = 0;
      for (unsigned l = 0; l < lanes_per_warp; ++l)
        if (lanes[l].mask != 0 && lanes[l].size == unit) pages |= 1u << l;
      const unsigned alone = pages & (pages - 1);  // every page lane but the first
      for (unsigned l = 0; l < lanes_per_warp; ++l)
        if (lanes[l].mask != 0) lanes[l].mask = alone >> l & 1 ? 1u << l : lanes[l].mask & ~alone;
      plan_needs(lanes);
    }
  }

  // The units each lane's claim needs, as random_walk.h serves one call;
  // returns the most units the call can claim.
  static std::uint64_t plan_needs(lane_task* lanes) {
    std::uint64_t demand = 0;
    for (unsigned l = 0; l < lanes_per_warp; ++l) {
      lanes[l].need = units_for(strategy_bytes(lanes[l].size));
      if (lanes[l].mask != 0 && strategy_bytes(lanes[l].size) >= unit) demand += lanes[l].need;
    }
    // Small requests (malloc_small): packed in lane order into one run; if
    // that fails, the lanes whose blocks start in one unit of it try again
    // together, and a lane's NULL says their run found no room.
    std::uint64_t offset[lanes_per_warp], share[lanes_per_warp] = {}, total = 0, group = 0;
    for (unsigned l = 0; l < lanes_per_warp; ++l)
      if (lanes[l].mask != 0 && strategy_bytes(lanes[l].size) < unit) {
        offset[l] = total;
        total += strategy_bytes(lanes[l].size);
        share[offset[l] / unit] += strategy_bytes(lanes[l].size);  // blocks that start in that unit of the run
        ++group;
      }
    std::uint64_t retried = 0;
    for (const std::uint64_t bytes : share) retried += units_for(bytes);
    demand += std::max(units_for(total), retried);
    if (group < 2) return demand;
    for (unsigned l = 0; l < lanes_per_warp; ++l)
      if (lanes[l].mask != 0 && strategy_bytes(lanes[l].size) < unit) lanes[l].need = units_for(share[offset[l] / unit]);
    return demand;
  }

  // The last malloc step's blocks and NULLs; whether it served any.
  bool collect() {
    bool served = false;
    std::uint64_t units = 0;
    for (unsigned i = 0; i < task.size(); ++i) {
      lane_task& t = task[i];
      if (t.mask == 0) continue;
      if (t.got == nullptr) {
        const std::uint64_t bytes = strategy_bytes(t.size);
        if (!has_free_run(P, t.need)) {
          ++nulls[bytes < unit ? 0 : bytes == unit ? 1 : 2];
        } else if (unexplained++ < 5) {
          FAIL("%s step %d: lane %u (mask %08x): NULL for %" PRIu64 " B (a claim of %" PRIu64
               " units) while the heap has a free run that long",
               name, step - 1, i, t.mask, t.size, t.need);
        }
        continue;
      }
      ++mallocs;
      served = true;
      if (t.overlapped) {
        ++overlaps;  // reported by its lane; never freed
      } else {
        live.push_back(block{t.got, t.size, t.pattern});
      }
    }
    const unit_bitmap bm = P.bitmap();
    for (std::uint64_t u = 0; u < P.L.units; ++u) units += used(bm, u);
    if (units > peak_units) peak_units = units;
    return served;
  }

  struct planner {
    full_run* run;
    void operator()() noexcept { run->next(); }
  };

  void lane(unsigned w, unsigned l, std::barrier<planner>& barrier) {
    const host_warp::lane me(*warp[w], l);
    const unsigned self = w * lanes_per_warp + l;
    heap_header* h = heap.get();
    for (;;) {
      barrier.arrive_and_wait();
      if (kind == step_kind::done) return;
      lane_task& t = task[self];
      if (kind == step_kind::free) {
        for (const block& b : t.to_free) {
          if (!intact(b) && count(corrupt) <= 5) FAIL("%s: block [%p, +%" PRIu64 ") overwritten before its free", name, b.p, b.size);
          heap.release(b.p, b.size);
          gpualloc::heap_free(h, b.p);
        }
        continue;
      }
      if (t.mask == 0) continue;
      {
        const host_warp::active together(t.mask);
        t.got = static_cast<unsigned char*>(gpualloc::heap_malloc(h, t.size));
      }
      if (t.got == nullptr) continue;
      if (!aligned(t.got)) FAIL("%s: lane %u got %p, not 16-byte aligned", name, self, t.got);
      if (!heap.claim(t.got, t.size, static_cast<std::uint16_t>(self + 1))) {
        t.overlapped = true;
        FAIL("%s: lane %u (mask %08x) got [%p, +%" PRIu64 ") overlapping a live block", name, self, t.mask, t.got, t.size);
        continue;
      }
      t.pattern = static_cast<unsigned char>(self * 31 + step * 7 + 1);
      const block b{t.got, t.size, t.pattern};
      fill(b);
      if (!intact(b) && count(corrupt) <= 5) FAIL("%s: block [%p, +%" PRIu64 ") overwritten while its lane filled it", name, b.p, b.size);
    }
  }

  void run() {
    std::barrier<planner> barrier(warps * lanes_per_warp, planner{this});
    std::vector<std::thread> lanes;
    for (unsigned w = 0; w < warps; ++w)
      for (unsigned l = 0; l < lanes_per_warp; ++l) lanes.emplace_back([this, w, l, &barrier] { lane(w, l, barrier); });
    for (auto& t : lanes) t.join();
    if (frees != mallocs - overlaps) FAIL("%s: %" PRIu64 " blocks, %" PRIu64 " freed", name, mallocs, frees);
  }
};

void run_full(const rw_strategy& s, std::uint64_t heap_bytes, unsigned warps, int steps, std::uint64_t seed) {
  char name[64];
  std::snprintf(name, sizeof name, "%s full", s.name);
  test_heap heap(s.id, heap_bytes, 0, 2);
  full_run run(heap, name, warps, steps, seed);
  const auto start = std::chrono::steady_clock::now();
  run.run();
  check_refill(heap, name, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %" PRIu64 " KiB heap (%" PRIu64 " units), %u warps x %d steps: %" PRIu64
              " blocks, at most %" PRIu64 " units used, NULL with no room: %" PRIu64 " small, %" PRIu64 " pages, %" PRIu64
              " runs; %" PRIu64 " NULL with room, %" PRIu64 " overwritten (%.2f s)\n",
              name, heap_bytes >> 10, run.P.L.units, warps, run.step - 1, run.mallocs, run.peak_units, run.nulls[0],
              run.nulls[1], run.nulls[2], run.unexplained, run.corrupt.load(), seconds);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> only, runs;
  int steps = HOST_TEST_TSAN ? 150 : 600;
  std::uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--strategy" && i + 1 < argc) {
      only.emplace_back(argv[++i]);
    } else if (a == "--run" && i + 1 < argc) {
      runs.emplace_back(argv[++i]);
    } else if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 0);
    } else {
      std::fprintf(stderr, "usage: %s [--strategy NAME]... [--run pages|mixed|full]... [--steps N] [--seed N]\n", argv[0]);
      return 2;
    }
  }
  for (const rw_strategy& s : all_strategies) {
    if (!only.empty() && std::find(only.begin(), only.end(), s.name) == only.end()) continue;
    const auto selected = [&](const char* run) { return runs.empty() || std::find(runs.begin(), runs.end(), run) != runs.end(); };
    if (selected("pages")) run_concurrent(s, mix::pages, 384 << 10, 3, steps, seed);
    if (selected("mixed")) run_concurrent(s, mix::mixed, 4 << 20, 2, steps, seed);
    if (selected("full")) run_full(s, 2 << 20, 2, 120, seed);
  }
  std::printf("%d failures\n", failures.load());
  return failures == 0 ? 0 : 1;
}
