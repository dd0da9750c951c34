// CMalloc, CFMalloc, CMMalloc and CFMMalloc (Vinkler & Havran, "Register
// Efficient Memory Allocator for GPUs", CGF 2015, sections 4.2-4.4): first
// fit over a circular singly linked list of chunks with in-band 16-byte
// headers, the heap pre-split into binary-heap-shaped segments
// (detail/presplit.h). One template, two orthogonal choices:
//   Header: split_chunk_header (flag word + next offset) or fused_chunk_header
//           (flags fused into the next offset, one word; CF*), detail/chunk_header.h;
//   Multi:  one shard (CMalloc) or one shard per SM (CM*: every SM starts its
//           walks in its own part of the list, R' = R/#SM).
//
// malloc: start at the shard's hint segment, resume at that segment's cursor,
// walk the list to the first free chunk of at least request + 16 bytes,
// absorbing free successors on the way; split it when the rest is worth a
// chunk; mark it used. Past the end of a segment the walk continues into the
// next one, past the end of the shard into the next shard (the multi-SM
// variants thus try every other SM's part before saying NULL), past the end
// of the list at its start. One full lap without success returns NULL (two
// laps if lock contention made the walk skip something).
// free: mark the chunk free, count the free in its segment, lower the
// segment's cursor, absorb free successors.
//
// Why not the paper's protocol as it stands: its walk reads `next` of chunks
// other threads hold, and its free merges the following chunk away. A walker
// that read an offset before the merge then CASes a header that no longer
// exists, i.e. bytes inside someone's allocation. Here a chunk header can
// only disappear while its predecessor is locked, so nothing may be reached
// except through a locked predecessor:
//
// Invariants
//  I1 A thread reads or writes a chunk's `next` only while it holds the
//     chunk's lock (chunk_locked). Used chunks are locked too, briefly, by
//     walkers passing over them; the owner's free waits (with back-off, for
//     a bounded number of tries: below) for them.
//  I2 Chunk Z is absorbed into its predecessor Y (Y.next = Z.next) only by a
//     thread holding both Y and Z, Z neither used nor permanent, and Z not its
//     segment's cursor. Z's header is then dead: it stays locked, marked
//     chunk_dead, and is not touched again.
//  I3 Walks move hand over hand: lock the next chunk, then unlock the current
//     one. A walker that cannot lock the next chunk (after bounded tries with
//     back-off) unlocks and jumps to the next segment's first chunk, an offset
//     it computes, never reads.
//  I4 Cursors: segment j's cursor word holds the chunk the cursor names and
//     a free epoch (presplit.h). The chunk is changed only by a thread
//     holding the first chunk P of segment j and the chunk the cursor will
//     name; the epoch is bumped by every free in j, without locks. A walker
//     entering segment j holds P while it reads the word and try-locks the
//     chunk it names. By I2 that chunk is alive.
//  I5 Hints name segments (never chunks), so they cannot go stale.
//  I6 The cursor is a low-water mark: every free chunk of segment j lies at
//     or after its cursor, but for a chunk being freed, whose freer lowers
//     the cursor before unlocking it. So walks entering a segment at its
//     cursor skip only used chunks. Free: bump j's epoch, then lower the
//     cursor to the freed chunk if that lies below it (the bump returns the
//     cursor). Allocation: a walk that entered j at cursor c with epoch e
//     advances the cursor past the chunk it took, by one compare-and-swap
//     from (c, e) under P's lock, only if it saw no free chunk on its way:
//     a chunk it passed used and that was freed behind it bumped e, so the
//     swap fails; a free whose bump came before the swap reads the advanced
//     cursor and lowers it again. (The paper's walk, and ours before the
//     epoch, advanced over a chunk freed behind it and lost that chunk.)
//     A failed advance leaves the cursor lower: a longer walk, never a lost
//     chunk. The epoch is 32 bits: a walk would have to see 2^32 frees in
//     its segment between entering and taking to be fooled.
//
// A double free or a foreign pointer (without checked mode, allocate.h) must
// not hang the GPU: free gives up on a chunk whose header is dead (absorbed:
// reported at once) or stays locked for free_lock_tries tries with back-off
// (~1 s of device time; a walker holds a chunk for well under a
// microsecond), and frees nothing from a chunk that is not in use or not in
// the list; each case prints one line naming the pointer (report). A trap
// would kill the whole context for a bug that costs at most one block.
//
// Deadlock freedom: the only unbounded wait is free() waiting for its
// segment's first chunk P to lower the cursor, holding nothing but its own
// chunk. P is permanent (never dead), and every holder of P is a walker or
// freer that takes all further locks with bounded try_lock, so it releases
// P in bounded time; no user bug keeps P locked.
//
// Memory ordering: chunk locks are acquire/release (detail/chunk_header.h);
// they order header writes, splits and links, and hand the bytes of a chunk
// from its last owner to its next. Cursor words: acquire loads, acq_rel
// read-modify-writes (what the cursor names is ordered by P's lock anyway).
// Hints: relaxed (a hint is only a place to start).
//
// Choices:
//  - offsets: 64-bit byte offsets (the fused layout keeps its flags in the
//    low 4 bits, which 16-byte alignment leaves free); a cursor word holds a
//    32-bit distance in 16-byte units, so segments are at most 64 GiB;
//  - header: 16 bytes (the paper's 8 would leave pointers 8-byte aligned);
//  - MAX_FRAG: a chunk is split when the rest would be at least 32 B (a header
//    and 16 B) and at least 1/8 of the request, so at most 1/8 (or 16 B) of a
//    chunk is wasted; the paper's MAX_FRAG as a ratio is 1.125;
//  - depth of the pre-split, shard count: detail/presplit.h.
// Lanes of a warp walk independently (the group is not used).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/chunk_header.h"
#include "gpualloc/detail/presplit.h"
#include "gpualloc/detail/sm.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"
#include "gpualloc/strategy.h"

// A test's hook into the walk, between choosing a chunk and advancing the
// cursor (tests/host/strategies/stress.cpp forces a free into that window).
#ifndef GPUALLOC_TEST_HOOK_CIRCULAR_TAKE
#define GPUALLOC_TEST_HOOK_CIRCULAR_TAKE()
#endif

namespace gpualloc::strategies {

template <class Header, bool Multi>
struct circular {
  static constexpr std::uint64_t header_bytes = sizeof(Header);
  static constexpr std::uint64_t min_chunk = 2 * header_bytes;  // a header and 16 B
  static constexpr unsigned max_frag_shift = 3;                 // split if the rest >= request / 8
  static constexpr int lock_tries = 4;                          // a walker's tries on a locked chunk
  static constexpr std::uint32_t free_lock_tries = 1u << 20;    // free's tries on its own chunk

  struct state {
    detail::presplit layout;
  };

  static constexpr int init_phases = 1;

  static void plan(state& s, const arena& a, const device_facts& facts) {
    s.layout = detail::presplit::make(a.bytes, Multi ? facts.sm_count : 1);
  }

  // Grid-stride over segments: a permanent header and a cursor each.
  GPUALLOC_HD static void init(state& s, const arena& a, int /*phase*/, std::uint64_t thread, std::uint64_t threads) {
    const detail::presplit& L = s.layout;
    const heap_view h{L, a.begin};
    for (std::uint64_t j = thread; j < L.segments; j += threads) {
      const auto seg = static_cast<std::uint32_t>(j);
      const std::uint64_t start = L.segment_start(seg);
      Header::create(h.at(start), L.segment_end(seg), detail::chunk_permanent, seg);
      detail::device_atomic<std::uint64_t>(h.cursor_word(seg)).store(0, detail::relaxed);  // at P, epoch 0
    }
    for (std::uint64_t shard = thread; shard < L.shards; shard += threads)
      detail::device_atomic<std::uint64_t>(h.hint(static_cast<std::uint32_t>(shard)))
          .store(L.first_segment(static_cast<std::uint32_t>(shard)), detail::relaxed);
  }

  GPUALLOC_HD static void* malloc(state& s, const arena& a, std::uint64_t bytes, const detail::lane_group&) {
    const detail::presplit& L = s.layout;
    if (bytes >= L.largest) return nullptr;  // also every impossible_request
    const std::uint64_t need = round_up(bytes, 16) + header_bytes;
    if (need > L.largest) return nullptr;
    const heap_view h{L, a.begin};
    walk w(h, need, Multi ? detail::sm_id() % L.shards : 0);
    return w.run();
  }

  GPUALLOC_HD static void free(state& s, const arena& a, void* p, const detail::lane_group&) {
    const heap_view h{s.layout, a.begin};
    const std::uint64_t cur = static_cast<std::uint64_t>(static_cast<std::byte*>(p) - h.list()) - header_bytes;
    detail::chunk_view before, v;
    if (!lock_own_chunk(h, cur, before, p)) return;
    v = before;
    v.flags &= ~detail::chunk_used;
    const std::uint32_t seg = Header::segment_of(h.at(cur));
    if (cur < h.count_free(seg).offset) lower_cursor(h, seg, cur, true);
    detail::chunk_view next;
    for (;;) {
      const absorb r = absorb_next(h, seg, cur, v, next);
      if (r == absorb::locked) Header::unlock(h.at(v.next), next, next);
      if (r != absorb::done) break;
    }
    Header::unlock(h.at(cur), before, v);
  }

 private:
  // A segment's cursor as read: the chunk it names, and its whole word (epoch included).
  struct cursor {
    std::uint64_t offset;
    std::uint64_t word;
  };

  struct heap_view {
    const detail::presplit& L;
    std::byte* arena_begin;

    GPUALLOC_HD std::byte* list() const { return arena_begin + L.list_offset; }
    GPUALLOC_HD Header* at(std::uint64_t offset) const { return reinterpret_cast<Header*>(list() + offset); }
    GPUALLOC_HD std::uint64_t& cursor_word(std::uint32_t seg) const {
      return reinterpret_cast<std::uint64_t*>(arena_begin + L.cursors_offset)[seg];
    }
    GPUALLOC_HD std::uint64_t& hint(std::uint32_t shard) const {
      return *reinterpret_cast<std::uint64_t*>(arena_begin + shard * detail::presplit::hint_stride);
    }
    GPUALLOC_HD cursor unpack(std::uint32_t seg, std::uint64_t word) const {
      return cursor{L.segment_start(seg) + detail::presplit::cursor_distance(word), word};
    }
    GPUALLOC_HD cursor load_cursor(std::uint32_t seg) const {
      return unpack(seg, detail::device_atomic<std::uint64_t>(cursor_word(seg)).load(detail::acquire));
    }
    // Counts a free in segment `seg` (bumps its epoch); returns the cursor as it was.
    GPUALLOC_HD cursor count_free(std::uint32_t seg) const {
      return unpack(seg, detail::device_atomic<std::uint64_t>(cursor_word(seg))
                             .fetch_add(detail::presplit::cursor_epoch_one, detail::acq_rel));
    }
    // Sets the cursor to `offset`, keeping the epoch, if the word still is `seen.word`; else `seen` becomes the word.
    GPUALLOC_HD bool replace_cursor(std::uint32_t seg, cursor& seen, std::uint64_t offset) const {
      const std::uint64_t word = detail::presplit::cursor_with_distance(seen.word, offset - L.segment_start(seg));
      std::uint64_t expected = seen.word;
      if (detail::device_atomic<std::uint64_t>(cursor_word(seg))
              .compare_exchange_strong(expected, word, detail::acq_rel, detail::acquire))
        return true;
      seen = unpack(seg, expected);
      return false;
    }
    // Forward distance along the circle; from == to is a full lap.
    GPUALLOC_HD std::uint64_t distance(std::uint64_t from, std::uint64_t to) const {
      return to > from ? to - from : L.list_bytes - from + to;
    }
  };

  GPUALLOC_HD static bool try_lock(const heap_view& h, std::uint64_t offset, detail::chunk_view& v, int tries) {
    detail::backoff b;
    for (int i = 1;; ++i) {
      if (Header::try_lock(h.at(offset), v)) return true;
      if (i >= tries) return false;
      b.pause();
    }
  }

  // Free: locks the caller's chunk `cur` (walkers passing over it hold it
  // briefly). False, after reporting, for anything but a used chunk of the
  // list: a double free, or a pointer this heap never handed out.
  GPUALLOC_HD static bool lock_own_chunk(const heap_view& h, std::uint64_t cur, detail::chunk_view& v, const void* p) {
    if (cur >= h.L.list_bytes || cur % 16 != 0) return report(p, "not a block of this heap");
    detail::backoff b;
    for (std::uint32_t tries = 1; !Header::try_lock(h.at(cur), v); ++tries) {
      if (Header::is_dead(h.at(cur))) return report(p, "double free (its chunk was merged into the one before it)");
      if (tries == free_lock_tries) return report(p, "its chunk stays locked (a double free, or not a block of this heap?)");
      b.pause();
    }
    if ((v.flags & detail::chunk_used) && Header::segment_of(h.at(cur)) < h.L.segments) return true;
    Header::unlock(h.at(cur), v, v);
    return report(p, v.flags & detail::chunk_used ? "not a block of this heap" : "double free (its chunk is free)");
  }

  // One line naming the pointer of a free that frees nothing; false. (Checked
  // mode, GPUALLOC_CHECK=1, catches the same frees earlier and names the thread.)
  GPUALLOC_HD static bool report(const void* p, const char* what) {
#if GPUALLOC_ON_DEVICE
    printf("gpualloc: free(%p): %s; nothing freed\n", p, what);
#else
    std::fprintf(stderr, "gpualloc: free(%p): %s; nothing freed\n", p, what);
#endif
    return false;
  }

  // Lowers segment `seg`'s cursor to `cur` (held by the caller) if it lies
  // above. `wait`: waits for the segment's first chunk P (free), else one
  // try (absorb_next). False if P was busy.
  GPUALLOC_HD static bool lower_cursor(const heap_view& h, std::uint32_t seg, std::uint64_t cur, bool wait) {
    const std::uint64_t start = h.L.segment_start(seg);
    detail::chunk_view p;
    if (start != cur) {
      detail::backoff b;
      while (!Header::try_lock(h.at(start), p)) {
        if (!wait) return false;
        b.pause();
      }
    }
    cursor c = h.load_cursor(seg);
    while (cur < c.offset && !h.replace_cursor(seg, c, cur)) {
      // only a free's epoch bump changed the word: try again
    }
    if (start != cur) Header::unlock(h.at(start), p, p);
    return true;
  }

  // A walk's advance (I6): sets segment `seg`'s cursor to `target` (held by
  // the caller) if its word still is `entry`, epoch included. One try at the
  // segment's first chunk, unless the caller holds it (`held`).
  GPUALLOC_HD static void advance_cursor(const heap_view& h, std::uint32_t seg, std::uint64_t held, cursor entry,
                                         std::uint64_t target) {
    const std::uint64_t start = h.L.segment_start(seg);
    detail::chunk_view p;
    if (start != held && !Header::try_lock(h.at(start), p)) return;
    h.replace_cursor(seg, entry, target);
    if (start != held) Header::unlock(h.at(start), p, p);
  }

  enum class absorb {
    done,    // the following chunk is now part of `cur`
    locked,  // the following chunk cannot be absorbed; it is locked into `next`
    failed,  // the following chunk is the list's start or held by another thread
  };

  // Tries to absorb the chunk after `cur` (held, view `v`, in segment `seg`): I2.
  GPUALLOC_HD static absorb absorb_next(const heap_view& h, std::uint32_t seg, std::uint64_t cur, detail::chunk_view& v,
                                        detail::chunk_view& next) {
    const std::uint64_t z = v.next;
    if (z == h.L.list_bytes || !Header::try_lock(h.at(z), next)) return absorb::failed;
    if (next.flags & (detail::chunk_used | detail::chunk_permanent)) return absorb::locked;
    // The cursor must never name a dead header: move it back to `cur` first.
    // Nobody can make z the cursor meanwhile: that needs z's lock, which we hold.
    if (h.load_cursor(seg).offset == z && !lower_cursor(h, seg, cur, false)) return absorb::locked;
    v.next = next.next;  // z's header is dead: it stays locked and unreachable
    Header::kill(h.at(z));
    return absorb::done;
  }

  // One malloc's walk along the list.
  class walk {
   public:
    GPUALLOC_HD walk(const heap_view& h, std::uint64_t need, std::uint32_t shard)
        : h_(h), need_(need), hint_(h.hint(shard)) {}

    GPUALLOC_HD void* run() {
      const detail::presplit& L = h_.L;
      std::uint32_t seg = static_cast<std::uint32_t>(detail::device_atomic<std::uint64_t>(hint_).load(detail::relaxed));
      if (seg >= L.segments) seg = 0;
      std::uint64_t pos = L.segment_start(seg);  // where the walk is; `travelled` counts from here
      bool held = false, first = true;
      for (;;) {
        if (!held) {
          // Enter segment `seg` at its first chunk (a jump from `pos`, or the start).
          const std::uint64_t start = L.segment_start(seg);
          if (!first) travelled_ += h_.distance(pos, start);
          first = false;
          pos = start;
          if (lap_done()) return nullptr;
          if (!try_lock(h_, start, before_, lock_tries)) {
            skipped_ = true;
            seg = L.next_segment(seg);
            continue;
          }
          cur_ = start;
          v_ = before_;
          held = true;
          enter(seg);
        }

        if (!(v_.flags & detail::chunk_used)) {
          detail::chunk_view next;
          absorb r = absorb::failed;
          while (v_.next - cur_ < need_) {
            r = absorb_next(h_, seg, cur_, v_, next);
            if (r != absorb::done) break;
          }
          if (v_.next - cur_ >= need_) return take(seg);
          clean_ = false;
          if (r == absorb::locked) {  // step onto it: it is locked already
            if (!step(v_.next, next, seg, pos)) return nullptr;
            continue;
          }
        }

        const std::uint64_t target = v_.next == L.list_bytes ? 0 : v_.next;
        detail::chunk_view next;
        if (!try_lock(h_, target, next, lock_tries)) {
          // I3: give up this segment, jump to the next one's start.
          skipped_ = true;
          Header::unlock(h_.at(cur_), before_, v_);
          held = false;
          pos = cur_;
          seg = L.next_segment(seg);
          continue;
        }
        if (!step(target, next, seg, pos)) return nullptr;
      }
    }

   private:
    // Moves from cur_ to `target`, already locked with view `next`. False: the walk is over.
    GPUALLOC_HD bool step(std::uint64_t target, const detail::chunk_view& next, std::uint32_t& seg, std::uint64_t& pos) {
      Header::unlock(h_.at(cur_), before_, v_);
      travelled_ += h_.distance(cur_, target);
      cur_ = pos = target;
      before_ = v_ = next;
      if (lap_done()) {
        Header::unlock(h_.at(cur_), before_, v_);
        return false;
      }
      if (v_.flags & detail::chunk_permanent) {
        seg = Header::segment_of(h_.at(cur_));
        enter(seg);
        pos = cur_;
      }
      return true;
    }

    // Holding segment `seg`'s first chunk: resume at the segment's cursor (I4).
    GPUALLOC_HD void enter(std::uint32_t seg) {
      entry_ = h_.load_cursor(seg);
      clean_ = true;
      const std::uint64_t c = entry_.offset;
      if (c == cur_) return;
      detail::chunk_view cv;
      if (!try_lock(h_, c, cv, 1)) {
        clean_ = false;  // walk the segment from its start
        return;
      }
      Header::unlock(h_.at(cur_), before_, v_);
      travelled_ += c - cur_;
      cur_ = c;
      before_ = v_ = cv;
    }

    // A full lap (two if something was skipped) without success.
    GPUALLOC_HD bool lap_done() {
      if (travelled_ < limit_) return false;
      if (skipped_ && limit_ == h_.L.list_bytes) {
        limit_ += h_.L.list_bytes;
        return false;
      }
      return true;
    }

    // cur_ is free (held) and large enough: split, mark used, advance the cursor.
    GPUALLOC_HD void* take(std::uint32_t seg) {
      std::uint64_t keep = cur_;  // the chunk the cursor may advance to
      const std::uint64_t rest = v_.next - cur_ - need_;
      if (rest >= min_chunk && rest >= (need_ >> max_frag_shift)) {
        keep = cur_ + need_;
        Header::create(h_.at(keep), v_.next, 0, seg);  // published by our unlock of cur_
        v_.next = keep;
      }
      GPUALLOC_TEST_HOOK_CIRCULAR_TAKE();
      if (clean_) advance_cursor(h_, seg, cur_, entry_, keep);
      v_.flags |= detail::chunk_used;
      Header::unlock(h_.at(cur_), before_, v_);
      detail::device_atomic<std::uint64_t> hint(hint_);
      if (hint.load(detail::relaxed) != seg) hint.store(seg, detail::relaxed);
      return h_.list() + cur_ + header_bytes;
    }

    const heap_view& h_;
    const std::uint64_t need_;
    std::uint64_t& hint_;
    std::uint64_t cur_ = 0;  // the chunk this walk holds
    detail::chunk_view before_{}, v_{};
    std::uint64_t travelled_ = 0;
    std::uint64_t limit_ = h_.L.list_bytes;
    cursor entry_{};        // the cursor word as the walk entered the segment
    bool clean_ = false;    // no free chunk seen since entering the segment at entry_
    bool skipped_ = false;  // lock contention made the walk skip part of the list
  };
};

using circular_malloc = circular<detail::split_chunk_header, false>;
using circular_fused_malloc = circular<detail::fused_chunk_header, false>;
using circular_multi_malloc = circular<detail::split_chunk_header, true>;
using circular_fused_multi_malloc = circular<detail::fused_chunk_header, true>;

}  // namespace gpualloc::strategies
