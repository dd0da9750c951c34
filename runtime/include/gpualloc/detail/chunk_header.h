// The 16-byte header in front of every chunk of the circular list that the
// CMalloc family (strategies/circular.h) walks, in two layouts:
//
//   split_chunk_header (CMalloc, CMMalloc):   [ flags u32 | segment u32 | next u64 ]
//   fused_chunk_header (CFMalloc, CFMMalloc): [ next | flags  u64     | segment u32 | unused u32 ]
//
// `next` is the byte offset, from the start of the list, of the following
// chunk (the list's length for the last chunk, which stands for offset 0).
// Offsets are 64-bit bytes, so any heap size works, and multiples of 16, so
// the fused layout keeps the flags in the low 4 bits of the same word (the
// paper fuses a 1-bit flag into a 32-bit word offset, which stops at 2^31
// words; we widen instead). The header is 16 bytes either way: chunk starts
// and user pointers (chunk + 16) stay 16-byte aligned.
//
// Flags:
//   chunk_locked     a thread holds the chunk: only it may change `flags` and
//                    `next`, and only it may absorb the following chunk
//   chunk_used       the chunk is handed out to the program
//   chunk_permanent  the first chunk of a pre-split segment: never absorbed
//   chunk_dead       (with chunk_locked, for good) the header was absorbed
//                    into the chunk before it; only a double free can find
//                    it, and reports it at once instead of waiting
// `segment` is the pre-split segment the chunk lies in; written when the
// chunk is created, never changed.
//
// Memory ordering: try_lock is a CAS with acquire on success, unlock is a
// store with release. Everything else in a header (`next`, a new header
// written by a split) is read and written relaxed by the lock holder only, so
// the lock's release/acquire pair publishes it to the next holder. A header
// is created while its creator holds the chunk it is split from; nobody can
// reach it before that chunk is unlocked. `dead` is written by the absorbing
// thread, which holds the chunk, relaxed: only diagnostics read it.
#pragma once

#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"

namespace gpualloc::detail {

enum chunk_flag : std::uint32_t {
  chunk_locked = 1u << 0,
  chunk_used = 1u << 1,
  chunk_permanent = 1u << 2,
  chunk_dead = 1u << 3,
};

// A chunk's header as its holder sees it.
struct chunk_view {
  std::uint64_t next;
  std::uint32_t flags;  // without chunk_locked
};

struct split_chunk_header {
  std::uint32_t flags;
  std::uint32_t segment;
  std::uint64_t next;

  // One attempt; fails if another thread holds the chunk.
  GPUALLOC_HD static bool try_lock(split_chunk_header* h, chunk_view& v) {
    device_atomic<std::uint32_t> flags(h->flags);
    std::uint32_t seen = flags.load(relaxed);
    if (seen & chunk_locked) return false;
    if (!flags.compare_exchange_strong(seen, seen | chunk_locked, acquire, relaxed)) return false;
    v.flags = seen;
    v.next = device_atomic<std::uint64_t>(h->next).load(relaxed);
    return true;
  }

  // `before` is the view try_lock returned; `after` what the chunk becomes.
  GPUALLOC_HD static void unlock(split_chunk_header* h, const chunk_view& before, const chunk_view& after) {
    if (after.next != before.next) device_atomic<std::uint64_t>(h->next).store(after.next, relaxed);
    device_atomic<std::uint32_t>(h->flags).store(after.flags & ~chunk_locked, release);
  }

  // A new, unlocked chunk; published by the caller's next unlock (or a kernel boundary at init).
  GPUALLOC_HD static void create(split_chunk_header* h, std::uint64_t next, std::uint32_t flags, std::uint32_t segment) {
    device_atomic<std::uint64_t>(h->next).store(next, relaxed);
    device_atomic<std::uint32_t>(h->segment).store(segment, relaxed);
    device_atomic<std::uint32_t>(h->flags).store(flags, relaxed);
  }

  GPUALLOC_HD static std::uint32_t segment_of(split_chunk_header* h) {
    return device_atomic<std::uint32_t>(h->segment).load(relaxed);
  }

  // The holder marks an absorbed chunk's header dead; it stays locked.
  GPUALLOC_HD static void kill(split_chunk_header* h) {
    device_atomic<std::uint32_t>(h->flags).store(chunk_locked | chunk_dead, relaxed);
  }

  GPUALLOC_HD static bool is_dead(split_chunk_header* h) {
    return device_atomic<std::uint32_t>(h->flags).load(relaxed) & chunk_dead;
  }
};

struct fused_chunk_header {
  std::uint64_t word;  // next | flags
  std::uint32_t segment;
  std::uint32_t unused;

  static constexpr std::uint64_t flag_mask = 0xf;

  GPUALLOC_HD static bool try_lock(fused_chunk_header* h, chunk_view& v) {
    device_atomic<std::uint64_t> word(h->word);
    std::uint64_t seen = word.load(relaxed);
    if (seen & chunk_locked) return false;
    if (!word.compare_exchange_strong(seen, seen | chunk_locked, acquire, relaxed)) return false;
    v.flags = static_cast<std::uint32_t>(seen & flag_mask);
    v.next = seen & ~flag_mask;
    return true;
  }

  GPUALLOC_HD static void unlock(fused_chunk_header* h, const chunk_view&, const chunk_view& after) {
    device_atomic<std::uint64_t>(h->word).store(after.next | (after.flags & ~chunk_locked), release);
  }

  GPUALLOC_HD static void create(fused_chunk_header* h, std::uint64_t next, std::uint32_t flags, std::uint32_t segment) {
    device_atomic<std::uint32_t>(h->segment).store(segment, relaxed);
    device_atomic<std::uint64_t>(h->word).store(next | flags, relaxed);
  }

  GPUALLOC_HD static std::uint32_t segment_of(fused_chunk_header* h) {
    return device_atomic<std::uint32_t>(h->segment).load(relaxed);
  }

  GPUALLOC_HD static void kill(fused_chunk_header* h) {
    device_atomic<std::uint64_t>(h->word).store(chunk_locked | chunk_dead, relaxed);
  }

  GPUALLOC_HD static bool is_dead(fused_chunk_header* h) {
    return device_atomic<std::uint64_t>(h->word).load(relaxed) & chunk_dead;
  }
};

static_assert(sizeof(split_chunk_header) == 16 && sizeof(fused_chunk_header) == 16,
              "a chunk header keeps user pointers 16-byte aligned");

}  // namespace gpualloc::detail
