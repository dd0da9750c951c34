// A warp of CPU threads: the host side of lane_group (detail/warp.h).
//
// On the device a lane_group's operations are warp intrinsics. On the host a
// lane is a std::thread, and a host_warp lets up to 32 of them exchange
// values the same way, so that the strategies' warp-level paths (prefix sums,
// broadcasts, partitions by size class) run on the CPU and under
// ThreadSanitizer. A thread that is no lane of a host_warp (the default) is a
// warp of one lane: lane 0, active mask 1, and no operation waits for anyone.
//
// Use (tests/host/strategies/warp_tests.cpp):
//   host_warp warp(32);                                  // shared by 32 threads
//   thread i:  host_warp::lane me(warp, i);              // this thread is lane i
//              { host_warp::active lanes(mask);          // the lanes that call together
//                heap_malloc(h, n); }                    // lane_group::coalesced() == mask
// The harness decides which lanes are active at each call (a full warp, part
// of one, one lane), as divergence does on the device; lane_group::coalesced()
// returns that mask. It stands for the mask at the call's start: a front end
// or strategy that asks for coalesced() again after some of its lanes have
// returned still gets every lane of the call, and the emulation reports the
// missing ones (below).
//
// Group operations. Each is a rendezvous of exactly the lanes of its mask:
// every lane gives one 64-bit value and receives those of all lanes of the
// mask. Rendezvous are keyed by the mask, so disjoint groups (after a
// partition) run their operations concurrently, and lanes that finished
// their part of a partition may wait at the whole group's next operation
// while the other parts still run. Every lane of a mask makes the same
// sequence of operations over it, so one mask has one operation in progress
// at a time; each pending rendezvous has a lane in it, so there are at most
// 32 of them.
//
// Checks, each aborting the program with a message: the lanes of a
// rendezvous must call the same operation, and the caller must be in the
// mask; a lane the others wait for that does not arrive within `patience`
// (it left a loop early, returned on another path, computed another mask: a
// group operation after divergence) is named with the operation. On the
// device the same bugs exchange garbage or hang.
//
// Memory ordering, as on the device: exchanges move values, not memory.
// __shfl_sync and __match_any_sync are no memory fences, so a value received
// from another lane does not make that lane's earlier writes (or what it
// acquired) visible. The emulation synchronises its own state with a mutex
// but hides that mutex from ThreadSanitizer, which therefore sees no
// happens-before edge from partition, broadcast, shuffle_from_rank,
// exclusive_sum, union_to_leader_across or all (__all_sync). Only
// lane_group::sync() (__syncwarp, which orders memory among the lanes it
// synchronises) is an acquire-release barrier here too, among exactly its
// lanes: each releases to a token made for that one operation, and
// acquires from it once all have arrived.
// What strategies must do: a lane that touches memory another thread
// released (a block the leader took from a free list with an acquire, say)
// must itself be ordered after that release: by its own acquire (a load of
// the word the leader acquired) or by group.sync() after the leader's acquire
// and before the lanes use the block. Without either, TSan reports the race.
#pragma once

#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#if defined(__SANITIZE_THREAD__)
#define GPUALLOC_HOST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GPUALLOC_HOST_TSAN 1
#endif
#endif

#if defined(GPUALLOC_HOST_TSAN)
// ThreadSanitizer's annotations (its runtime defines them).
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
extern "C" void AnnotateIgnoreSyncBegin(const char* file, int line);
extern "C" void AnnotateIgnoreSyncEnd(const char* file, int line);
#endif

namespace gpualloc::detail {

class host_warp {
 public:
  static constexpr unsigned max_lanes = 32;

  enum class op : unsigned char { partition, ballot, broadcast, shuffle_from_rank, exclusive_sum, union_of, all, sync };

  explicit host_warp(unsigned lanes, std::chrono::milliseconds patience = std::chrono::seconds(30))
      : lanes_(lanes), patience_(patience) {
    if (lanes == 0 || lanes > max_lanes) fail("a warp has 1 to 32 lanes");
  }
  host_warp(const host_warp&) = delete;
  host_warp& operator=(const host_warp&) = delete;

  unsigned lanes() const { return lanes_; }
  unsigned all_lanes() const { return lanes_ == 32 ? ~0u : (1u << lanes_) - 1; }

  // Makes the calling thread lane `id` of `warp` while it lives; the lane
  // starts alone (its active mask is its own bit).
  class lane {
   public:
    lane(host_warp& warp, unsigned id) : self_{&warp, id, 0}, outer_(current) {
      if (id >= warp.lanes()) fail("no such lane");
      self_.active = 1u << id;
      current = &self_;
    }
    ~lane() { current = outer_; }
    lane(const lane&) = delete;
    lane& operator=(const lane&) = delete;

   private:
    friend class host_warp;
    struct state {
      host_warp* warp;
      unsigned id;
      unsigned active;
    } self_;
    state* outer_;
  };

  // Sets the calling lane's active mask (the lanes that call together, this
  // one among them) while it lives.
  class active {
   public:
    explicit active(unsigned mask) : outer_(current ? current->active : 1u) {
      if (current == nullptr) fail("host_warp::active outside a lane");
      if (!(mask >> current->id & 1u) || (mask & ~current->warp->all_lanes()) != 0)
        fail("an active mask must hold the calling lane and lanes of its warp only");
      current->active = mask;
    }
    ~active() { current->active = outer_; }
    active(const active&) = delete;
    active& operator=(const active&) = delete;

   private:
    unsigned outer_;
  };

  // The calling thread's lane and active mask (0 and 1 outside a host_warp).
  static unsigned lane_id() { return current ? current->id : 0; }
  static unsigned active_mask() { return current ? current->active : 1u; }

  // Group operation `what` of the calling lane over `mask` (of more than one
  // lane): gives `value`, and returns in values[l] the value of every lane l of `mask`.
  static void gather(op what, unsigned mask, std::uint64_t value, std::uint64_t (&values)[max_lanes]) {
    if (current == nullptr || !(mask >> current->id & 1u) || (mask & ~current->warp->all_lanes()) != 0)
      fail_op(what, "called by a lane outside its group's mask");
    current->warp->rendezvous(what, mask, current->id, value, values);
  }

  // Reports a misuse of the emulation and aborts.
  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "gpualloc host warp: %s\n", what);
    std::abort();
  }

 private:
  static const char* name(op what) {
    switch (what) {
      case op::partition: return "partition";
      case op::ballot: return "ballot";
      case op::broadcast: return "broadcast";
      case op::shuffle_from_rank: return "shuffle_from_rank";
      case op::exclusive_sum: return "exclusive_sum";
      case op::union_of: return "union_of";
      case op::all: return "all";
      case op::sync: return "sync";
    }
    return "?";
  }

  [[noreturn]] static void fail_op(op what, const char* why) {
    std::fprintf(stderr, "gpualloc host warp: lane %u: group operation %s %s\n", lane_id(), name(what), why);
    std::abort();
  }

  // A group operation in progress: the rendezvous of the lanes of `mask`.
  struct meeting {
    std::condition_variable changed;
    unsigned mask = 0;      // 0: a free slot
    unsigned arrived = 0;   // lanes that gave their value
    unsigned departed = 0;  // lanes that took the values
    op what{};
    std::uint64_t* token = nullptr;  // sync: what its lanes release to and acquire from (TSan)
    std::uint64_t values[max_lanes];
  };

  // Hides the emulation's own synchronisation and bookkeeping from TSan.
  class tsan_hidden {
   public:
    tsan_hidden() {
#if defined(GPUALLOC_HOST_TSAN)
      AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
      AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
      AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
#endif
    }
    ~tsan_hidden() {
#if defined(GPUALLOC_HOST_TSAN)
      AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
      AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
      AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
    }
  };

  // A release to / an acquire from `token` that TSan sees, inside a tsan_hidden scope.
  static void tsan_visible(std::uint64_t* token, bool release) {
#if defined(GPUALLOC_HOST_TSAN)
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    release ? __tsan_release(token) : __tsan_acquire(token);
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
#else
    (void)token, (void)release;
#endif
  }

  void rendezvous(op what, unsigned mask, unsigned id, std::uint64_t value, std::uint64_t (&values)[max_lanes]) {
    const unsigned me = 1u << id;
    const tsan_hidden hide;
    std::unique_lock<std::mutex> lock(m_);
    meeting* g = join(lock, what, mask);
    if (g->what != what) {
      std::fprintf(stderr,
                   "gpualloc host warp: lane %u calls %s over lanes %08x while lanes %08x of that group call %s: the "
                   "lanes of a group disagree (they diverged)\n",
                   id, name(what), mask, g->arrived, name(g->what));
      std::abort();
    }
    g->values[id] = value;
    g->arrived |= me;
    if (what == op::sync) tsan_visible(g->token, true);
    if (g->arrived == mask) {
      g->changed.notify_all();
    } else {
      wait(lock, *g, what, mask, [&] { return g->arrived == mask; }, "waits for lanes that never arrive:");
    }
    if (what == op::sync) tsan_visible(g->token, false);
    for (unsigned m = mask; m != 0; m &= m - 1) values[std::countr_zero(m)] = g->values[std::countr_zero(m)];
    g->departed |= me;
    if (g->departed == mask) {
      delete g->token;
      g->token = nullptr;
      g->mask = g->arrived = g->departed = 0;
      g->changed.notify_all();
    }
  }

  // The meeting of `mask` that is gathering its lanes, or a new one; waits
  // while the mask's previous operation still has lanes leaving it.
  meeting* join(std::unique_lock<std::mutex>& lock, op what, unsigned mask) {
    for (;;) {
      meeting* found = nullptr;
      meeting* free_slot = nullptr;
      for (meeting& g : meetings_) {
        if (g.mask == mask) found = &g;
        if (g.mask == 0 && free_slot == nullptr) free_slot = &g;
      }
      if (found == nullptr) {
        if (free_slot == nullptr) fail_op(what, "finds more than 32 group operations in progress");
        free_slot->mask = mask;
        free_slot->what = what;
        if (what == op::sync) free_slot->token = new std::uint64_t(0);
        return free_slot;
      }
      if (found->arrived != mask) return found;
      wait(lock, *found, what, mask, [&] { return found->mask != mask || found->arrived != mask; },
           "waits for lanes still leaving the previous operation of its group:");
    }
  }

  template <class Ready>
  void wait(std::unique_lock<std::mutex>& lock, meeting& g, op what, unsigned mask, Ready ready, const char* why) {
    if (g.changed.wait_for(lock, patience_, ready)) return;
    const unsigned missing = g.mask & ~(g.arrived == g.mask ? g.departed : g.arrived);
    std::fprintf(stderr,
                 "gpualloc host warp: lane %u in %s over lanes %08x %s lanes %08x (waited %lld ms); a group "
                 "operation after the lanes diverged?\n",
                 lane_id(), name(what), mask, why, missing, static_cast<long long>(patience_.count()));
    std::abort();
  }

  static inline thread_local lane::state* current = nullptr;

  const unsigned lanes_;
  const std::chrono::milliseconds patience_;
  std::mutex m_;  // guards every meeting
  meeting meetings_[max_lanes];
};

}  // namespace gpualloc::detail
