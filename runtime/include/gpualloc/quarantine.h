// Checked mode's quarantine: a freed block is poisoned (its bytes, up to
// most_poisoned_bytes, filled with freed_byte) and waits in a ring of
// h->checks.quarantine_slots blocks (65,536; fewer in a heap under 64 MiB)
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
//     began drains the whole ring (one thread, by compare-and-swap on
//     quarantine_drained); one that fails while a drain runs waits for it
//     (boundedly); either then retries once. So memory held back by the
//     quarantine costs a failed allocation a retry, not a NULL.
//
// Memory ordering: a pusher writes the poison and the freeing place, then
// exchanges the slot with acq_rel; whoever takes the block out (acq_rel
// exchange) or looks at it (the sweep: acquire load) sees both.
#pragma once

#include <cstdint>

#include "gpualloc/checked.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/backoff.h"
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

// Q3: the drain state, quarantine_drained: the pushes counted when the last
// drain began, times two, plus one while it runs.
enum class drain_turn : std::uint8_t { drain, retry };

// Q3, after an allocation failed: drain (the caller won the drain, and
// calls drain_done after it) or retry (a drain since the last push already
// gave the blocks back, or one just ran: waited for, boundedly).
GPUALLOC_INLINE drain_turn claim_drain(heap_header* h) {
  checked_region& c = h->checks;
  auto state = detail::device_atomic<std::uint64_t>(c.quarantine_drained);
  const std::uint64_t pushes = detail::device_atomic<std::uint64_t>(c.quarantine_pushes).load(detail::relaxed);
  std::uint64_t seen = state.load(detail::acquire);
  if ((seen & 1) == 0) {
    if (seen >> 1 == pushes) return drain_turn::retry;
    if (state.compare_exchange_strong(seen, pushes << 1 | 1, detail::acquire)) return drain_turn::drain;
  }
  detail::backoff wait;
  for (int i = 0; i < (1 << 16) && (state.load(detail::acquire) & 1) != 0; ++i) wait.pause();
  return drain_turn::retry;
}

// Q3: the drain the caller won is over (release: its frees come before a waiter's retry).
GPUALLOC_INLINE void drain_done(heap_header* h) {
  auto state = detail::device_atomic<std::uint64_t>(h->checks.quarantine_drained);
  state.fetch_and(~std::uint64_t{1}, detail::release);
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

}  // namespace gpualloc::checked
