// Checked mode's quarantine: a freed block is poisoned (its bytes, up to
// most_poisoned_bytes, filled with freed_byte) and waits in a ring of
// h->checks.quarantine_slots blocks (65,536; in a heap under 512 MiB one per 8 KiB of heap)
// before the strategy may reuse it. A write into it meanwhile is a use
// after free: found when the block leaves the ring (pushed out by a later
// free, or drained by an allocation that failed) or by the sweep after each
// kernel (runtime/src/checks.cu), whichever comes first (C3 in checked.h).
// A second free of a quarantined block still finds its header: a double
// free is reported however much else the heap handed out meanwhile.
//
// Invariants
//  Q1 A slot holds 0 or the header of a freed block; a block is in at most
//     one slot, and a block taken out of a slot (by exchange) is released to
//     the strategy by exactly the thread that took it.
//  Q2 Pushes go round the ring in the order of quarantine_pushes, so a
//     block stays until quarantine_slots later frees (or a drain).
//  Q3 An allocation that fails while pushes happened since the last drain
//     began starts a drain of the whole ring (by compare-and-swap on
//     quarantine_drained); one that fails while a drain runs helps it. The
//     ring is drained in chunks of drain_chunk_slots slots, each claimed by
//     one thread (drain_next) and counted when finished (drain_left); the
//     thread that finishes the last chunk ends the drain. Helpers that find
//     every chunk claimed wait (boundedly: most_drain_wait_ns) for its end.
//     Either way the failed allocation then retries once: memory held back
//     by the quarantine costs it a retry, not a NULL, and many failing
//     threads drain the ring together rather than waiting for one (a first
//     version drained with one thread while the others waited 2^16 pauses:
//     on a busy CPU the wait ran out first, and a request saw NULL).
//  Q4 A block taken out of the ring is tagged block_released before the
//     strategy gets it back: a header left inside memory the strategy hands
//     out again then tells the read check (read_check.h) that it is no
//     longer quarantined, and a late free of it is still a double free.
//
// Memory ordering: a pusher writes the poison and the freeing place, then
// exchanges the slot with acq_rel; whoever takes the block out (acq_rel
// exchange) or looks at it (the sweep: acquire load) sees both.
#pragma once

#include <cstdint>

#include "gpualloc/checked.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
#include "gpualloc/detail/clock.h"
#include "gpualloc/heap.h"

namespace gpualloc::checked {

inline constexpr unsigned char freed_byte = 0xfd;  // what a freed block holds
inline constexpr std::uint64_t freed_word = 0x0101010101010101ull * freed_byte;
inline constexpr std::uint64_t most_poisoned_bytes = std::uint64_t{64} << 10;  // of each block, from its start

// The bytes of a block of `requested` bytes that are poisoned when it is freed.
GPUALLOC_INLINE std::uint64_t poisoned_bytes(std::uint64_t requested) {
  const std::uint64_t body = body_bytes(requested);
  return body < most_poisoned_bytes ? body : most_poisoned_bytes;
}

// Fills the poisoned bytes of the block at p (16-byte aligned) with freed_byte, a word at a time.
GPUALLOC_INLINE void poison(void* p, std::uint64_t requested) {
  auto* words = static_cast<std::uint64_t*>(p);
  for (std::uint64_t i = 0, n = poisoned_bytes(requested) / 8; i < n; ++i) words[i] = freed_word;
}

// The poisoned bytes of the block at p that were written since.
GPUALLOC_INLINE damage freed_damage(const void* p, std::uint64_t requested) {
  const auto* words = static_cast<const std::uint64_t*>(p);
  const std::uint64_t n = poisoned_bytes(requested) / 8;
  std::uint64_t first = 0;
  while (first < n && words[first] == freed_word) ++first;
  if (first == n) return {};
  std::uint64_t last = n - 1;
  while (words[last] == freed_word) --last;
  const damage in_first = damage_in(p, first * 8, first * 8 + 8, freed_byte);
  const damage in_last = damage_in(p, last * 8, last * 8 + 8, freed_byte);
  return {in_first.first, in_last.last};
}

// Q1, Q2: puts the freed block with `header` into the ring; returns the
// block it pushed out (to be checked and released by the caller), or nullptr.
GPUALLOC_INLINE checked_header* enter_quarantine(heap_header* h, checked_header* header) {
  checked_region& c = h->checks;
  const std::uint64_t push = detail::device_atomic<std::uint64_t>(c.quarantine_pushes).fetch_add(1, detail::relaxed);
  const std::uint64_t slot = push & (c.quarantine_slots - 1);
  const std::uint64_t out = detail::device_atomic<std::uint64_t>(c.quarantine[slot])
                                .exchange(reinterpret_cast<std::uintptr_t>(header), detail::acq_rel);
  return reinterpret_cast<checked_header*>(out);
}

// Q1: takes the block out of slot `slot`; nullptr if it is empty.
GPUALLOC_INLINE checked_header* leave_quarantine(heap_header* h, std::uint64_t slot) {
  auto s = detail::device_atomic<std::uint64_t>(h->checks.quarantine[slot]);
  if (s.load(detail::relaxed) == 0) return nullptr;
  return reinterpret_cast<checked_header*>(s.exchange(0, detail::acq_rel));
}

// Looks for writes into the quarantined block with `header` (found by
// `by` at `at`): reported and counted once (C3).
GPUALLOC_INLINE void check_freed_block(heap_header* h, checked_header* header, finder by, const place& at) {
  checked_header fields;
  if (!sealed(header, &fields)) {
    // Its header was overwritten while freed: where its bytes end is unknown.
    if (first_to_report(header, damage_use_after_free)) {
#if GPUALLOC_ON_DEVICE
      printf("gpualloc: heap-use-after-free: the header of the freed block at %p was overwritten; found by %s%s\n",
             static_cast<void*>(user_of(header)),
             by == finder::sweep ? "the sweep after kernel " : "the quarantine's eviction in kernel ",
             kernel_name(h, at.kernel));
#endif
      detail::device_atomic<std::uint64_t>(h->counters.use_after_frees).fetch_add(1, detail::relaxed);
    }
    return;
  }
  const void* p = user_of(header);
  const damage d = freed_damage(p, fields.requested);
  if (!d.any() || !first_to_report(header, damage_use_after_free)) return;
  const place freed = freed_place(header);
  report_damage(h, "heap-use-after-free", p, fields, d, &freed, by, at);
  detail::device_atomic<std::uint64_t>(h->counters.use_after_frees).fetch_add(1, detail::relaxed);
}

// Q4: the block with `header`, taken out of the ring (and checked), goes
// back to the strategy. Relaxed: the strategy's free orders what follows.
GPUALLOC_INLINE void release_to_strategy(checked_header* header) {
  detail::device_atomic<std::uint32_t>(header->tag).store(block_released, detail::relaxed);
}

// Q3: the ring's chunks, and how long a thread waits for chunks that others drain.
inline constexpr std::uint64_t drain_chunk_slots = 16;
inline constexpr std::uint64_t most_drain_wait_ns = std::uint64_t{1} << 30;  // about a second

GPUALLOC_INLINE std::uint64_t drain_chunks(const checked_region& c) {
  return (c.quarantine_slots + drain_chunk_slots - 1) / drain_chunk_slots;
}

// Q3: takes the blocks out of the ring's chunk `chunk`, checks them and
// hands them to give_back. The place it reports from is read per chunk:
// held across the drain's claims, it took 9 registers more in Thrust's sort
// kernel under `atomic` (wrapper/register-parity.test), and out of line
// this function took as many.
template <class GiveBack>
GPUALLOC_INLINE void drain_chunk(heap_header* h, std::uint64_t chunk, GiveBack& give_back) {
  const place at = here(h);
  const std::uint64_t end = (chunk + 1) * drain_chunk_slots;
  for (std::uint64_t slot = chunk * drain_chunk_slots; slot < end && slot < h->checks.quarantine_slots; ++slot)
    if (checked_header* out = leave_quarantine(h, slot)) {
      check_freed_block(h, out, finder::eviction, at);
      release_to_strategy(out);
      give_back(out);
    }
}

// Q3, after an allocation failed: starts or helps a drain of the ring;
// each block taken out is checked and handed to give_back(header), which
// returns it to the strategy. Returns when the drain is over (or the wait
// for it ran out), or at once when nothing was pushed since the last drain
// began.
//
// Memory ordering: the starter sets drain_left before it resets drain_next
// (release), so a thread whose claim (acq_rel) reads the reset sees the
// count it will decrement; the last chunk's finisher ends the drain with a
// release that a waiter's acquire load pairs with, so the drain's frees
// come before the waiter's retry.
template <class GiveBack>
GPUALLOC_INLINE void drain_quarantine(heap_header* h, GiveBack give_back) {
  checked_region& c = h->checks;
  auto state = detail::device_atomic<std::uint64_t>(c.quarantine_drained);
  auto next = detail::device_atomic<std::uint64_t>(c.drain_next);
  auto left = detail::device_atomic<std::uint64_t>(c.drain_left);
  const std::uint64_t chunks = drain_chunks(c);
  const std::uint64_t pushes = detail::device_atomic<std::uint64_t>(c.quarantine_pushes).load(detail::relaxed);
  std::uint64_t seen = state.load(detail::acquire);
  if ((seen & 1) == 0) {
    if (seen >> 1 == pushes) return;
    if (state.compare_exchange_strong(seen, pushes << 1 | 1, detail::acq_rel)) {
      seen = pushes << 1 | 1;
      left.store(chunks, detail::relaxed);
      next.store(0, detail::release);
    } else if ((seen & 1) == 0) {
      return;  // a drain began and ended since the first load
    }
  }
  // A claim that reads an earlier drain's count, or no_drain_claims (laid
  // out so, before the first drain), finds it past the last chunk, and only
  // waits; so does one made before this drain's reset.
  for (std::uint64_t chunk; (chunk = next.fetch_add(1, detail::acq_rel)) < chunks;) {
    drain_chunk(h, chunk, give_back);
    if (left.fetch_sub(1, detail::acq_rel) == 1) state.fetch_and(~std::uint64_t{1}, detail::release);
  }
  detail::backoff wait;
  for (const std::uint64_t start = detail::now_ns();
       state.load(detail::acquire) == seen && detail::now_ns() - start < most_drain_wait_ns;)
    wait.pause();
}

}  // namespace gpualloc::checked
