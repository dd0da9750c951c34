// The warp shapes of tests/gpu/warps.cu on emulated warps of CPU threads
// (gpualloc/detail/host_warp.h), for one strategy, plain and under TSan:
// what gallatin_lanes.cpp and sm_slab_lanes.cpp share.
//
// Each warp runs steps; at its barrier a planner gives every lane its call of
// the step, in the shapes of warps.cu: partial warps (the first n lanes),
// chosen lanes of a full warp, two and four divergent branches (each branch
// its own group, all calling at once), loops that lanes leave after different
// counts, malloc(0) beside 24-byte requests, a size per lane (1 .. 300 B,
// 16 + (lane % 7) * 48 with some lanes at 100 KiB, 8 .. 4096 B), one size for the group through the
// front end or as a same-size group; frees of the neighbour lane's blocks, of
// other warps' (through a mailbox), and frees in some lanes while the others
// allocate. The front end rounds every request to 16 B, so lanes of one
// class with runs of different lengths (80 B: 5 x 16 B beside 16 B, 48 B,
// 112 B ...) meet in one block. And as on the GPU, where the lanes of two
// branches, each calling the same-size entry with its own uniform size, can
// enter that one function together: a same-size group whose lanes ask for
// two sizes (detail/warp.h: partition() splits such a group; before, this
// shape overlapped blocks).
//
// Checked: every block 16-byte aligned, no two live blocks overlap (a shadow
// map of 16-byte granules), every block keeps its pattern until freed, no
// NULL (from 64 MiB heaps on), and at the end the strategy's own check of
// its state at rest (the caller's `at_rest`).
#pragma once

#include "harness.h"  // first: see there

#include <barrier>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <mutex>

// harness.h's hook, defined once per binary: each lanes test is one translation unit.
void circular_take_hook() {}

namespace lanes {

using namespace stress;
using gpualloc::detail::host_warp;

constexpr unsigned lanes_per_warp = 32;
constexpr std::size_t cap = 6;  // blocks a lane holds at most

enum class call : std::uint8_t { idle, malloc, malloc_same_size, free };

struct held_block {
  block b;
  unsigned owner;
};

struct lane_call {
  call what = call::idle;
  unsigned branch = 0;  // lanes of one branch call together (their mask)
  unsigned mask = 0;
  std::uint64_t size = 0;
  held_block victim{};
};

struct warp_state {
  warp_state(unsigned id, std::uint64_t seed) : lanes(lanes_per_warp), r(seed), id(id) {}
  host_warp lanes;
  rng r;
  unsigned id;
  int step = 0;
  bool drained = false;
  std::vector<held_block> live[lanes_per_warp];
  lane_call calls[lanes_per_warp];
};

unsigned lane_size(unsigned lane, unsigned salt) { return 1 + (lane * 37 + salt * 11) % 300; }

bool chosen(unsigned which, unsigned lane) {
  switch (which) {
    case 0: return lane % 3 == 0;
    case 1: return lane >= 20;
    case 2: return lane == 31;
    case 3: return (lane & 5) == 0;
    default: return lane != 0;
  }
}

struct run_state {
  run_state(test_heap& heap, int steps, const char* name) : heap(heap), steps(steps), name(name) {}
  test_heap& heap;
  const int steps;
  const char* name;
  std::mutex mailbox_lock;
  std::vector<held_block> mailbox;
  std::atomic<std::uint64_t> mallocs{0}, nulls{0}, frees{0}, overlaps{0}, corrupt{0}, misaligned{0};

  // Lane l's call: malloc of `size` in branch `branch`, or (when it holds
  // too much, or `frees`) a free of its neighbour's block, its own, or one
  // from the mailbox.
  void set_malloc(warp_state& w, unsigned l, unsigned branch, std::uint64_t size, bool same_size = false) {
    lane_call& c = w.calls[l];
    if (w.live[l].size() >= cap) return set_free(w, l, branch + 16);
    c.what = same_size ? call::malloc_same_size : call::malloc;
    c.branch = branch;
    c.size = size;
  }
  void set_free(warp_state& w, unsigned l, unsigned branch) {
    lane_call& c = w.calls[l];
    if (w.r.below(4) == 0) {
      const std::lock_guard<std::mutex> lock(mailbox_lock);
      if (!mailbox.empty()) {
        c = lane_call{call::free, branch, 0, 0, mailbox.back()};
        mailbox.pop_back();
        return;
      }
    }
    for (unsigned from : {(l + 1) % lanes_per_warp, l, (l + 7) % lanes_per_warp}) {
      if (w.live[from].empty()) continue;
      c = lane_call{call::free, branch, 0, 0, w.live[from].back()};
      w.live[from].pop_back();
      return;
    }
  }

  void plan(warp_state& w) {
    for (lane_call& c : w.calls) c = lane_call{};
    if (w.drained) return;
    rng& r = w.r;
    if (w.step++ >= steps) {
      for (unsigned l = 0; l < lanes_per_warp; ++l)
        if (!w.live[l].empty()) set_free(w, l, 1);
    } else {
      plan_step(w);
    }
    bool any = false;
    for (unsigned l = 0; l < lanes_per_warp; ++l) {
      unsigned mask = 0;
      for (unsigned m = 0; m < lanes_per_warp; ++m)
        if (w.calls[m].what != call::idle && w.calls[m].branch == w.calls[l].branch) mask |= 1u << m;
      w.calls[l].mask = mask;
      any |= w.calls[l].what != call::idle;
    }
    w.drained = !any && w.step > steps;
    if (r.below(8) == 0) donate(w);
  }

  void plan_step(warp_state& w) {
    rng& r = w.r;
    const auto salt = static_cast<unsigned>(r.below(1000));
    const bool some_free = r.below(3) == 0;  // some lanes free while the others allocate
    const auto shape = r.below(10);
    for (unsigned l = 0; l < lanes_per_warp; ++l) {
      if (some_free && (l + salt) % 3 == 0) {
        set_free(w, l, 9);
        continue;
      }
      switch (shape) {
        case 0: {  // a partial warp: the first n lanes, one size or a size per lane
          const unsigned n = 1 + salt % lanes_per_warp;
          if (l < n) set_malloc(w, l, 1, salt % 2 ? 48 : lane_size(l, salt), salt % 4 == 1);
          break;
        }
        case 1: {  // chosen lanes of a full warp
          const unsigned which = salt % 5;
          if (chosen(which, l)) set_malloc(w, l, 1, salt % 2 ? 16 + 16 * which : lane_size(l, which + salt));
          break;
        }
        case 2:  // two branches
          set_malloc(w, l, 1 + (l & 1), l & 1 ? 40 + salt % 3 * 40 : 2000 - salt % 2 * 1984);
          break;
        case 3:  // four branches, a size per lane in each
          set_malloc(w, l, 1 + l % 4,
                     l % 4 == 0 ? 8 + l : l % 4 == 1 ? 100 + 3 * l : l % 4 == 2 ? 1000 + 31 * l : 4096 - l);
          break;
        case 4: {  // iteration i of a loop that lane l runs l % 5 + 1 times
          const unsigned i = salt % 5;
          if (i < l % 5 + 1) set_malloc(w, l, 1, salt % 2 ? 64 : 16 * i + l * 3 + 1);
          break;
        }
        case 5:  // malloc(0) everywhere, or beside 24 B in the other branch
          set_malloc(w, l, salt % 2 ? 1 : 1 + (l & 1), salt % 2 || (l & 1) == 0 ? 0 : 24);
          break;
        case 6:  // 16 + (t % 7) * 48, and in some lanes 100 KiB (sm-slab: a run beside the classes)
          set_malloc(w, l, 1, (l + salt) % 11 == 0 ? 100 << 10 : 16 + (l + salt) % 7 * 48);
          break;
        case 7:  // a few sizes of one class: runs of different lengths
          set_malloc(w, l, 1, 16 * (1 + (l * 5 + salt) % 8));
          break;
        case 8: {  // two branches whose same-size calls meet in the shared entry point: one group, two sizes
          static constexpr std::uint64_t pairs[][2] = {{24, 0}, {40, 2000}, {48, 80}, {16, 112}, {80, 4096}, {208, 64}};
          const auto& pair = pairs[salt % 6];
          set_malloc(w, l, 1, pair[l & 1], true);
          break;
        }
        default:  // everybody frees
          set_free(w, l, 1);
          break;
      }
    }
  }

  void donate(warp_state& w) {
    const auto l = static_cast<unsigned>(w.r.below(lanes_per_warp));
    const std::lock_guard<std::mutex> lock(mailbox_lock);
    for (int i = 0; i < 3 && !w.live[l].empty(); ++i) {
      mailbox.push_back(w.live[l].back());
      w.live[l].pop_back();
    }
  }

  void make_call(warp_state& w, unsigned lane) {
    const lane_call& c = w.calls[lane];
    const unsigned self = w.id * lanes_per_warp + lane;
    heap_header* h = heap.get();
    host_warp::active together(c.mask);
    if (c.what == call::free) {
      const block& b = c.victim.b;
      if (!intact(b)) ++corrupt;
      heap.release(b.p, b.size);
      gpualloc::heap_free(h, b.p);
      ++frees;
      return;
    }
    void* p;
    if (c.what == call::malloc) {
      p = gpualloc::heap_malloc(h, c.size);
    } else {
      p = gpualloc::heap_malloc(h, c.size, static_cast<strategy_id>(h->strategy), gpualloc::coalescing::same_size);
    }
    if (p == nullptr) {
      ++nulls;
      return;
    }
    ++mallocs;
    if (!aligned(p)) ++misaligned;
    const std::uint64_t extent = c.size == 0 ? 16 : c.size;
    if (!heap.claim(p, extent, static_cast<std::uint16_t>(self + 1))) {
      if (overlaps++ < 5)
        FAIL("%s lanes: lane %u (mask %08x) got [%p, +%" PRIu64 ") overlapping a live block", name, self, c.mask,
             p, extent);
      return;
    }
    block b{static_cast<unsigned char*>(p), extent, static_cast<unsigned char>(self * 31 + w.step * 7 + 1)};
    fill(b);
    w.live[lane].push_back({b, self});
  }
};

struct step_planner {
  run_state* run;
  warp_state* w;
  void operator()() noexcept { run->plan(*w); }
};

// The strategy's check of its state once every block is freed.
using at_rest_check = void (*)(test_heap&);

void run_lanes(strategy_id id, const char* name, at_rest_check at_rest, std::uint64_t heap_bytes, unsigned warps,
               int steps) {
  test_heap heap(id, heap_bytes, 0, 2);
  run_state run(heap, steps, name);
  std::vector<std::unique_ptr<warp_state>> state;
  std::vector<std::unique_ptr<std::barrier<step_planner>>> barriers;
  for (unsigned w = 0; w < warps; ++w) {
    state.push_back(std::make_unique<warp_state>(w, heap_bytes + w));
    barriers.push_back(std::make_unique<std::barrier<step_planner>>(lanes_per_warp, step_planner{&run, state[w].get()}));
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> lanes;
  for (unsigned w = 0; w < warps; ++w)
    for (unsigned l = 0; l < lanes_per_warp; ++l)
      lanes.emplace_back([&, w, l] {
        warp_state& ws = *state[w];
        const host_warp::lane me(ws.lanes, l);
        for (;;) {
          barriers[w]->arrive_and_wait();
          if (ws.drained) return;
          if (ws.calls[l].what != call::idle) run.make_call(ws, l);
        }
      });
  for (auto& t : lanes) t.join();
  for (const held_block& v : run.mailbox) {
    if (!intact(v.b)) ++run.corrupt;
    heap.release(v.b.p, v.b.size);
    gpualloc::heap_free(heap.get(), v.b.p);
    ++run.frees;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %" PRIu64 " MiB heap, %u warps x %d steps: %" PRIu64 " blocks, %" PRIu64 " NULL, %" PRIu64
              " overlaps, %" PRIu64 " overwritten (%.2f s)\n",
              name, heap_bytes >> 20, warps, steps, (std::uint64_t)run.mallocs, (std::uint64_t)run.nulls,
              (std::uint64_t)run.overlaps, (std::uint64_t)run.corrupt, seconds);
  const bool nulls_fail = heap_bytes >= (64u << 20);  // a 16 MiB heap may run dry: its blocks are spread over many classes
  if (run.overlaps || run.corrupt || run.misaligned || (nulls_fail && run.nulls))
    FAIL("%s lanes, %" PRIu64 " MiB heap: %" PRIu64 " overlaps, %" PRIu64 " overwritten, %" PRIu64
         " misaligned, %" PRIu64 " NULL",
         name, heap_bytes >> 20, (std::uint64_t)run.overlaps, (std::uint64_t)run.corrupt, (std::uint64_t)run.misaligned,
         (std::uint64_t)run.nulls);
  if (run.frees != run.mallocs)
    FAIL("%s lanes: %" PRIu64 " blocks, %" PRIu64 " freed", name, (std::uint64_t)run.mallocs,
         (std::uint64_t)run.frees);
  at_rest(heap);
}

// The test's main: options, then heaps of 16 MiB, 64 MiB and 1 GiB (not under TSan).
int lanes_main(int argc, char** argv, strategy_id id, const char* name, at_rest_check at_rest) {
  int steps = HOST_TEST_TSAN ? 300 : 2000;
  unsigned warps = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--steps" && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (a == "--warps" && i + 1 < argc) {
      warps = static_cast<unsigned>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--steps N] [--warps N]\n", argv[0]);
      return 2;
    }
  }
  for (std::uint64_t mib : {16, 64, 1024})
    if (!HOST_TEST_TSAN || mib < 1024) run_lanes(id, name, at_rest, mib << 20, warps, steps);  // under TSan 1 GiB costs ~15 s of shadow
  std::printf("%d failures\n", failures.load());
  return failures == 0 ? 0 : 1;
}

}  // namespace lanes
