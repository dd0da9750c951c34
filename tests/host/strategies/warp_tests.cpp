// Warp mode: the strategies under emulated warps of CPU threads
// (gpualloc/detail/host_warp.h), so that their warp-level paths (prefix sums,
// broadcasts, partitions by size) run on the host, plain and under TSan.
//
//  host warp   the emulation itself, once: every lane_group operation against
//              a reference, over full, partial and one-lane masks; partitions
//              whose subgroups then operate concurrently; sync() ordering
//              memory (TSan would report the leader's write otherwise).
//  warps       per strategy, 1 and then 4 warps of 32 lanes. Each warp runs
//              steps; its planner (the completion of the warp's barrier,
//              while all its lanes wait) picks the active lanes (the whole
//              warp, a random part, one lane) and what each does: malloc with
//              sizes that differ per lane or fall into a few classes
//              (heap_malloc: the front end's coalesced group, partitioned by
//              the strategy), one size for all (the strategy called with
//              coalesced_same_size()), two sizes in one same-size group (two
//              call sites sharing that entry: detail/warp.h), each lane alone
//              (single()); frees of
//              its own blocks, of other lanes' and of other warps' (handed
//              over through a mailbox); malloc and free mixed in one step (two
//              groups, as divergent paths). Shadow map and patterns as in the
//              thread stress; NULL only from a strategy that never reuses.
//              Warps step independently, one barrier each, except for
//              `unsafe` strategies: one barrier for all lanes and at most one
//              block per lane, so the live memory always fits the heap.
//  checked     2 warps through the front end only, with the tracking header
//              (stats + checked mode; the quarantine's ring wraps, so some
//              lanes' frees push a block out and free it alone): the
//              counters balance.
//  --warp-demo the emulation's reports, for stress.test: lanes that diverge
//              before a group operation, lanes that disagree on one, and (TSan
//              build) a block handed from the leader to a lane by broadcast
//              without ordering, which TSan must report as a race.
#include "harness.h"  // first: see there

#include <barrier>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <mutex>

#include "gpualloc/detail/host_warp.h"
#include "gpualloc/detail/warp.h"

namespace stress {
namespace {

using gpualloc::detail::host_warp;
using gpualloc::detail::lane_group;

constexpr unsigned warp_lanes = 32;

// A random mask of lanes: the whole warp, a random part, or one lane.
unsigned pick_active(rng& r, unsigned all) {
  const auto shape = r.below(100);
  if (shape < 55) return all;
  if (shape < 85) return (static_cast<unsigned>(r.next()) & all) | (1u << r.below(std::popcount(all)));
  return 1u << r.below(std::popcount(all));
}

unsigned lane_of_rank(unsigned mask, unsigned rank) {
  for (unsigned r = 0; r < rank; ++r) mask &= mask - 1;
  return std::countr_zero(mask);
}

// ---- the emulation itself ----

struct selftest_step {
  unsigned active = 0;
  unsigned src_rank = 0;  // for shuffle_from_rank
  std::uint64_t value[warp_lanes] = {};
  std::uint64_t key[warp_lanes] = {};  // for partition: a few distinct keys
  std::uint64_t payload = 0;           // written by the leader, read by all after sync()
};

struct selftest {
  host_warp warp{warp_lanes};
  rng r{77};
  int steps;
  int step = 0;
  selftest_step now;
  std::atomic<int> bad{0};

  void plan() noexcept {
    now = selftest_step{};
    if (step++ == steps) return;  // active 0: done
    now.active = pick_active(r, warp.all_lanes());
    now.src_rank = static_cast<unsigned>(r.below(std::popcount(now.active)));
    const std::uint64_t keys = 1 + r.below(4);
    for (unsigned l = 0; l < warp_lanes; ++l) {
      now.value[l] = r.below(1u << 20);
      now.key[l] = r.below(keys) * 0x100000001ull;
    }
  }

  // One lane's share of a step: each operation against the reference.
  void check(unsigned lane) {
    const selftest_step& st = now;
    if (!(st.active >> lane & 1u)) return;
    host_warp::active together(st.active);
    auto expect = [&](bool ok, const char* what) {
      if (!ok && bad.fetch_add(1) < 5) FAIL("host warp: lane %u, mask %08x: %s", lane, st.active, what);
    };
    const lane_group g = lane_group::coalesced();
    const unsigned leader = std::countr_zero(st.active);
    const unsigned below = st.active & ((1u << lane) - 1);
    expect(g.mask() == st.active && g.size() == (unsigned)std::popcount(st.active) &&
               g.rank() == (unsigned)std::popcount(below) && g.is_leader() == (below == 0),
           "coalesced(): mask, size or rank");
    expect(g.broadcast(st.value[lane]) == st.value[leader], "broadcast");
    expect(g.shuffle_from_rank(st.value[lane], st.src_rank) == st.value[lane_of_rank(st.active, st.src_rank)],
           "shuffle_from_rank");
    std::uint64_t total = 0, before = 0, sum = 0;
    for (unsigned m = st.active; m != 0; m &= m - 1) {
      const unsigned l = std::countr_zero(m);
      if (l < lane) before += st.value[l];
      sum += st.value[l];
    }
    expect(g.exclusive_sum(st.value[lane], total) == before && total == sum, "exclusive_sum");
    bool all_odd = true;  // values are random: all odd in small groups, mixed in large ones
    for (unsigned m = st.active; m != 0; m &= m - 1) all_odd = all_odd && st.value[std::countr_zero(m)] % 2 == 1;
    expect(g.all(st.value[lane] % 2 == 1) == all_odd, "all");

    // The subgroups of one key operate concurrently.
    const lane_group part = g.partition(st.key[lane]);
    unsigned same = 0;
    std::uint64_t part_before = 0, part_sum = 0, part_union = 0;
    for (unsigned m = st.active; m != 0; m &= m - 1) {
      const unsigned l = std::countr_zero(m);
      if (st.key[l] != st.key[lane]) continue;
      same |= 1u << l;
      if (l < lane) part_before += st.value[l];
      part_sum += st.value[l];
      part_union |= st.value[l];
    }
    expect(part.mask() == same && part.rank() == (unsigned)std::popcount(same & ((1u << lane) - 1)), "partition");
    expect(part.exclusive_sum(st.value[lane], total) == part_before && total == part_sum, "exclusive_sum in a partition");
    expect(part.broadcast(st.value[lane]) == st.value[std::countr_zero(same)], "broadcast in a partition");
    const lane_group going = g.partition(st.key[lane], true);  // every sub-group goes on: one operation for all
    expect(going.union_to_leader_across(st.value[lane]) == (going.is_leader() ? part_union : 0),
           "union_to_leader_across in a partition");

    const lane_group same_size = lane_group::coalesced_same_size();
    // A same-size group is a hint: lanes with other keys split it (warp.h).
    expect(same_size.same_size() && same_size.partition(st.key[lane]).mask() == same, "same-size partition");
    const lane_group one = lane_group::single();
    expect(one.mask() == 1u << lane && one.size() == 1 && one.is_leader() && one.broadcast(st.value[lane]) == st.value[lane],
           "single()");

    // sync() orders memory: the leader's plain write, read by every lane (TSan checks the edge).
    if (g.is_leader()) now.payload = st.value[leader] + 1;
    g.sync();
    expect(now.payload == st.value[leader] + 1, "a write before sync() not seen after it");
    g.sync();  // nobody writes the payload again before everyone read it
  }
};

struct selftest_planner {
  selftest* t;
  void operator()() noexcept { t->plan(); }
};

// ---- strategies in warp mode ----

enum class call : std::uint8_t { idle, malloc_by_size, malloc_same_size, malloc_single, free, kinds };

struct held_block {
  block b;
  unsigned owner;  // warp * 32 + lane that allocated it
};

struct lane_call {
  call what = call::idle;
  unsigned mask = 0;       // the lanes that make this call together
  std::uint64_t size = 0;  // malloc
  held_block victim{};     // free
};

struct warp_state {
  warp_state(unsigned id, std::uint64_t seed) : lanes(warp_lanes), r(seed), id(id) {}
  host_warp lanes;
  rng r;
  unsigned id;
  int step = 0;
  bool drained = false;  // all steps done and every block freed
  std::vector<held_block> live[warp_lanes];
  lane_call calls[warp_lanes];
};

// The strategy called directly with group `g` (as the front end does, without its header): same-size and single groups.
void* strategy_malloc(heap_header* h, std::uint64_t size, const lane_group& g) {
  const std::uint64_t bytes = gpualloc::round_up(size == 0 ? 1 : size, gpualloc::min_alignment);
  return gpualloc::visit_strategy(static_cast<strategy_id>(h->strategy), [&](auto tag) -> void* {
    using S = typename decltype(tag)::type;
    return S::malloc(gpualloc::state_of<typename S::state>(h), h->space, bytes, g);
  });
}

struct warp_run {
  warp_run(const strategy_info& s, test_heap& heap, int steps, bool front_end_only)
      : s(s), heap(heap), steps(steps), front_end_only(front_end_only), unsafe(s.reuse == reuse_policy::unsafe),
        cap(unsafe ? 1 : 8) {}

  const strategy_info& s;
  test_heap& heap;
  const int steps;
  const bool front_end_only;  // every call through heap_malloc / heap_free (tracked heaps)
  const bool unsafe;
  const std::size_t cap;      // blocks a lane holds at most
  std::mutex mailbox_lock;
  std::vector<held_block> mailbox;  // blocks on their way to another warp
  std::atomic<std::uint64_t> mallocs{0}, in_groups{0}, nulls{0}, frees{0}, by_other_lane{0}, by_other_warp{0};

  // At the barrier, all the warp's lanes waiting: the calls of its next step.
  void plan(warp_state& w) {
    for (lane_call& c : w.calls) c = lane_call{};
    if (w.drained) return;
    if (w.step++ >= steps) {
      // Drain: every lane that holds a block frees one.
      for (unsigned l = 0; l < warp_lanes; ++l) {
        if (w.live[l].empty()) continue;
        w.calls[l] = lane_call{call::free, 0, 0, w.live[l].back()};
        w.live[l].pop_back();
      }
    } else {
      plan_step(w);
    }
    unsigned masks[static_cast<int>(call::kinds)] = {};
    for (unsigned l = 0; l < warp_lanes; ++l) masks[static_cast<int>(w.calls[l].what)] |= 1u << l;
    for (unsigned l = 0; l < warp_lanes; ++l) w.calls[l].mask = masks[static_cast<int>(w.calls[l].what)];
    w.drained = masks[static_cast<int>(call::idle)] == w.lanes.all_lanes() && w.step > steps;
  }

  void plan_step(warp_state& w) {
    rng& r = w.r;
    const unsigned active = pick_active(r, w.lanes.all_lanes());
    const auto kind = r.below(100);  // <55 malloc, <75 free, else both
    const std::uint64_t one_size = request_size(r);
    const std::uint64_t classes[3] = {request_size(r), request_size(r), request_size(r)};
    const auto rotation = static_cast<unsigned>(r.below(warp_lanes));
    if (!unsafe && r.below(4) == 0) donate(w);
    for (unsigned m = active; m != 0; m &= m - 1) {
      const unsigned l = std::countr_zero(m);
      lane_call& c = w.calls[l];
      const bool frees = (kind >= 55 && kind < 75) || (kind >= 75 && r.below(2) == 0) || w.live[l].size() >= cap;
      if (frees) {
        take_victim(w, l, rotation, c);
        continue;
      }
      c.what = call::malloc_by_size;
      c.size = request_size(r);
      if (kind < 25 || kind >= 75) continue;  // sizes differ per lane
      if (kind < 35) {
        c.size = classes[r.below(3)];  // a few size classes
      } else if (kind < 50) {
        c.size = one_size;  // one size: through the front end, or as a same-size group
        if (!front_end_only && kind >= 40) c.what = call::malloc_same_size;
        // Two call sites, each with its own uniform size, sharing the one
        // same-size entry, as lanes of divergent branches do on the GPU.
        if (c.what == call::malloc_same_size && kind >= 45 && l % 2 == 1) c.size = classes[0];
      } else if (!front_end_only) {
        c.what = call::malloc_single;
      }
    }
  }

  // Up to 4 blocks of one lane leave for other warps.
  void donate(warp_state& w) {
    const auto l = static_cast<unsigned>(w.r.below(warp_lanes));
    const std::lock_guard<std::mutex> lock(mailbox_lock);
    for (int i = 0; i < 4 && !w.live[l].empty(); ++i) {
      mailbox.push_back(w.live[l].back());
      w.live[l].pop_back();
    }
  }

  // Lane l frees a block: one from the mailbox (another warp's, mostly), of lane l + rotation, or its own.
  void take_victim(warp_state& w, unsigned l, unsigned rotation, lane_call& c) {
    if (!unsafe && w.r.below(5) == 0) {
      const std::lock_guard<std::mutex> lock(mailbox_lock);
      if (!mailbox.empty()) {
        c.what = call::free;
        c.victim = mailbox.back();
        mailbox.pop_back();
        return;
      }
    }
    for (unsigned from : {(l + rotation) % warp_lanes, l}) {
      if (w.live[from].empty()) continue;
      c.what = call::free;
      c.victim = w.live[from].back();
      w.live[from].pop_back();
      return;
    }
  }

  // Lane `lane` of warp w makes its call of this step.
  void make_call(warp_state& w, unsigned lane) {
    const lane_call& c = w.calls[lane];
    const unsigned self = w.id * warp_lanes + lane;
    heap_header* h = heap.get();
    host_warp::active together(c.mask);
    if (c.what == call::free) {
      const block& b = c.victim.b;
      if (!intact(b))
        FAIL("%.*s warps: block [%p, +%" PRIu64 ") of lane %u was overwritten", NAME(s), (void*)b.p, b.size,
             c.victim.owner);
      heap.release(b.p, b.size);
      gpualloc::heap_free(h, b.p);
      ++frees;
      by_other_lane += c.victim.owner != self;
      by_other_warp += c.victim.owner / warp_lanes != w.id;
      return;
    }
    void* p = c.what == call::malloc_by_size ? gpualloc::heap_malloc(h, c.size)
              : c.what == call::malloc_same_size ? strategy_malloc(h, c.size, lane_group::coalesced_same_size())
                                                 : strategy_malloc(h, c.size, lane_group::single());
    if (p == nullptr) {
      ++nulls;
      return;
    }
    ++mallocs;
    in_groups += std::popcount(c.mask) > 1 && c.what != call::malloc_single;
    if (!aligned(p)) FAIL("%.*s warps: %p not 16-byte aligned", NAME(s), p);
    if (!heap.claim(p, c.size, static_cast<std::uint16_t>(self + 1))) {
      FAIL("%.*s warps: lane %u got [%p, +%" PRIu64 ") overlapping a live block", NAME(s), self, p, c.size);
      return;
    }
    block b{static_cast<unsigned char*>(p), c.size, static_cast<unsigned char>(self * 31 + w.step * 7 + 1)};
    fill(b);
    w.live[lane].push_back({b, self});
  }
};

// Lanes that step together (one warp, or every warp of an `unsafe` run).
struct step_group {
  warp_run* run;
  std::vector<warp_state*> warps;
  bool done = false;

  void plan() {
    bool all = true;
    for (warp_state* w : warps) {
      run->plan(*w);
      all &= w->drained;
    }
    done = all;
  }
};

struct step_planner {
  step_group* g;
  void operator()() noexcept { g->plan(); }
};

void run_warps(const strategy_info& s, const options& o, unsigned warps, int steps, std::uint32_t flags,
               const char* label) {
  test_heap heap(s.id, o.heap_mib << 20, flags, 3);
  warp_run run(s, heap, steps, flags != 0);
  std::vector<std::unique_ptr<warp_state>> state;
  for (unsigned w = 0; w < warps; ++w) state.push_back(std::make_unique<warp_state>(w, 1000 * w + warps));
  std::vector<std::unique_ptr<step_group>> groups;
  for (unsigned w = 0; w < warps; ++w) {
    if (run.unsafe && w > 0) {
      groups[0]->warps.push_back(state[w].get());
      continue;
    }
    groups.push_back(std::make_unique<step_group>(step_group{&run, {state[w].get()}}));
  }
  std::vector<std::unique_ptr<std::barrier<step_planner>>> barriers;
  for (auto& g : groups)
    barriers.push_back(
        std::make_unique<std::barrier<step_planner>>(g->warps.size() * warp_lanes, step_planner{g.get()}));

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> lanes;
  for (unsigned w = 0; w < warps; ++w) {
    const std::size_t gi = run.unsafe ? 0 : w;
    for (unsigned l = 0; l < warp_lanes; ++l)
      lanes.emplace_back([&, w, l, gi] {
        warp_state& ws = *state[w];
        const host_warp::lane me(ws.lanes, l);
        for (;;) {
          barriers[gi]->arrive_and_wait();
          if (groups[gi]->done) return;
          if (ws.calls[l].what != call::idle) run.make_call(ws, l);
        }
      });
  }
  for (auto& t : lanes) t.join();
  for (const held_block& v : run.mailbox) {  // handed over, never taken: freed here, by a thread of no warp
    if (!intact(v.b)) FAIL("%.*s %s: a block in the mailbox was overwritten", NAME(s), label);
    heap.release(v.b.p, v.b.size);
    gpualloc::heap_free(heap.get(), v.b.p);
    ++run.frees;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  note("  %s: %u x %u lanes x %d steps, %" PRIu64 " blocks (%" PRIu64 " in groups), %" PRIu64
       " NULL; frees by other lanes %" PRIu64 ", by other warps %" PRIu64 " (%.2f s)\n",
       label, warps, warp_lanes, steps, (std::uint64_t)run.mallocs, (std::uint64_t)run.in_groups,
       (std::uint64_t)run.nulls, (std::uint64_t)run.by_other_lane, (std::uint64_t)run.by_other_warp, seconds);
  if (run.frees != run.mallocs)
    FAIL("%.*s %s: %" PRIu64 " blocks, %" PRIu64 " freed", NAME(s), label, (std::uint64_t)run.mallocs,
         (std::uint64_t)run.frees);
  if (s.reuse != reuse_policy::none && run.nulls != 0)
    FAIL("%.*s %s: %" PRIu64 " requests returned NULL", NAME(s), label, (std::uint64_t)run.nulls);
  const gpualloc::heap_counters& c = heap.get()->counters;
  if (flags != 0 && (c.mallocs != c.frees || c.mallocs != run.mallocs || c.bytes_in_use != 0 || c.double_frees != 0 ||
                     c.foreign_frees != 0))
    FAIL("%.*s %s: counters mallocs %" PRIu64 " frees %" PRIu64 " in use %" PRIu64 " double %" PRIu64
         " foreign %" PRIu64,
         NAME(s), label, c.mallocs, c.frees, c.bytes_in_use, c.double_frees, c.foreign_frees);
}

// The demos: each ends the program (an abort, or TSan's report) or returns 1.
int demo_divergence() {
  host_warp warp(4, std::chrono::milliseconds(300));
  on_lanes(warp, [](unsigned lane, const lane_group& g) {
    if (lane != 3) (void)g.broadcast(lane);  // lane 3 diverged: it never reaches the broadcast
  });
  return 1;
}

int demo_disagreement() {
  host_warp warp(2);
  on_lanes(warp, [](unsigned lane, const lane_group& g) {
    std::uint64_t total;
    if (lane == 0) (void)g.broadcast(lane);
    else (void)g.exclusive_sum(lane, total);
  });
  return 1;
}

// The leader acquires a block another thread filled and broadcasts it; lane 1 reads it with no ordering of its own.
int demo_unordered() {
  if (!HOST_TEST_TSAN) {
    std::fprintf(stderr, "--warp-demo unordered needs the TSan build\n");
    return 2;
  }
  std::vector<int> payload(16);
  std::atomic<int*> ready{nullptr};
  std::thread writer([&] {  // nothing orders its writes before the lanes' reads but `ready`
    for (int i = 0; i < 16; ++i) payload[i] = i;
    ready.store(payload.data(), std::memory_order_release);
  });
  host_warp warp(2);
  on_lanes(warp, [&](unsigned lane, const lane_group& g) {
    int* p = nullptr;
    if (g.is_leader())
      while ((p = ready.load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();
    p = g.broadcast(p);
    if (lane == 1) std::printf("lane 1 read %d\n", p[7]);
  });
  writer.join();
  return 1;
}

}  // namespace

void test_host_warp(const options& o) {
  selftest t;
  t.steps = o.steps;
  std::barrier<selftest_planner> sync(warp_lanes, selftest_planner{&t});
  std::vector<std::thread> lanes;
  for (unsigned l = 0; l < warp_lanes; ++l)
    lanes.emplace_back([&, l] {
      const host_warp::lane me(t.warp, l);
      for (;;) {
        sync.arrive_and_wait();
        if (t.now.active == 0) return;
        t.check(l);
      }
    });
  for (auto& th : lanes) th.join();
  std::printf("host warp: %d steps of group operations over random masks%s\n", o.steps,
              t.bad == 0 ? ", all as on the device" : ": WRONG");
}

void test_warps(const strategy_info& s, const options& o) {
  run_warps(s, o, 1, o.steps, 0, "warp");
  run_warps(s, o, 4, o.steps, 0, "warps");
  run_warps(s, o, 2, o.steps / 2, gpualloc::heap_flag_stats | gpualloc::heap_flag_checked, "warps, checked mode");
}

int warp_demo(std::string_view which) {
  if (which == "divergence") return demo_divergence();
  if (which == "disagreement") return demo_disagreement();
  if (which == "unordered") return demo_unordered();
  std::fprintf(stderr, "unknown demo %.*s\n", (int)which.size(), which.data());
  return 2;
}

}  // namespace stress
