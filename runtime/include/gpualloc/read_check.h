// Checked mode's read check. Code compiled with gpualloc-clang++
// --gpualloc-check-reads (compiler_pass/CheckReads.cpp) tests the value of
// every load from global memory: when each of its bytes is freed_byte (a
// quarantined block's poison) or zone_byte (a red zone), it calls
// __gpualloc_check_read(p, size), which finds the checked header in front
// of p and reports
//  - a read of a quarantined block: heap-use-after-free;
//  - a read of a live block's front or back zone: heap-buffer-underflow or
//    heap-buffer-overflow;
// naming the block, the bytes read, who allocated (and freed) it and the
// reading kernel and thread; each kind once per block (C3 in checked.h),
// counted with the writes of that kind (use_after_frees, overflows).
//
// What it cannot see: a read of poisoned bytes that a write after the free
// changed (the write is reported when the block leaves the quarantine), a
// read more than most_read_walk_bytes past a header (a block's poison and
// zones beyond its first 64 KiB), and a block the strategy has handed out
// again.
//
// Invariants
//  R1 The header of the block holding p is the nearest sealed header below
//     p's granule, at most most_read_walk_bytes below it: sealed headers are
//     written only at block starts, and a quarantined block's bytes are
//     poison, so none lies inside a block that the walk can mistake for it
//     (a stale one inside memory the strategy handed out again carries
//     block_released, quarantine.h Q4, and ends the walk without a report).
//  R2 The walk reads only the blocks' region, with relaxed loads: the
//     arena, or for a strategy without one (`cuda`) the span from the
//     lowest block it handed out to the highest end of one (CUDA's device
//     heap is one allocation, of the size set before the first kernel).
//     The blocks it passes may be allocated, freed or reused while it
//     looks, so a report is made only from a header that passed the seal
//     (C1) and a tag read after it.
#pragma once

#include <cstdint>

#include "gpualloc/checked.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/heap.h"
#include "gpualloc/quarantine.h"

namespace gpualloc::checked {

// R1: how far below a read the walk looks for its block's header.
inline constexpr std::uint64_t most_read_walk_bytes = front_bytes + most_poisoned_bytes + zone_bytes;

// Whether the tag of the header at h is one checked mode writes (a cheap
// test before the seal's).
GPUALLOC_INLINE bool has_block_tag(checked_header* h) {
  const std::uint32_t tag = detail::device_atomic<std::uint32_t>(h->tag).load(detail::relaxed);
  return tag == block_live || tag == block_freed || tag == block_released;
}

// R2: a strategy without an arena hands out `bytes` at block.
GPUALLOC_INLINE void note_block_outside(heap_header* h, const void* block, std::uint64_t bytes) {
  const auto at = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(block));
  detail::device_atomic<std::uint64_t>(h->checks.outside_begin).fetch_min(at, detail::relaxed);
  detail::device_atomic<std::uint64_t>(h->checks.outside_end).fetch_max(at + bytes, detail::relaxed);
}

// R2: the span a strategy without an arena handed its blocks out in so far.
GPUALLOC_INLINE arena blocks_outside(const heap_header* h) {
  const std::uint64_t begin = detail::device_atomic<const std::uint64_t>(h->checks.outside_begin).load(detail::relaxed);
  const std::uint64_t end = detail::device_atomic<const std::uint64_t>(h->checks.outside_end).load(detail::relaxed);
  if (begin >= end) return {nullptr, 0};
  return {reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(begin)), end - begin};
}

// R1, R2: the nearest sealed header below p in `blocks` within
// most_read_walk_bytes (its sealed fields in *fields), or nullptr.
GPUALLOC_INLINE checked_header* header_below(const arena& blocks, const void* p, checked_header* fields) {
  const auto* begin = blocks.begin;
  const auto* granule = reinterpret_cast<const std::byte*>(reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{15});
  // A header ends at least a front zone before its program's pointer, so
  // the nearest one p could belong to starts front_bytes - zone_bytes below p's granule.
  const std::uint64_t nearest = front_bytes - zone_bytes;
  if (granule - begin < static_cast<std::ptrdiff_t>(nearest)) return nullptr;
  const std::uint64_t room = static_cast<std::uint64_t>(granule - begin) - nearest;
  const std::uint64_t farthest = room < most_read_walk_bytes ? room : most_read_walk_bytes;
  for (std::uint64_t back = 0; back <= farthest; back += min_alignment) {
    auto* candidate = reinterpret_cast<checked_header*>(const_cast<std::byte*>(granule - nearest - back));
    if (has_block_tag(candidate) && sealed(candidate, fields)) return candidate;
  }
  return nullptr;
}

// Offsets [first, last] from a block's program's pointer, read by a load of
// `size` bytes at offset `at`, inside [from, to); none: last < first.
GPUALLOC_INLINE damage read_within(std::int64_t at, std::uint64_t size, std::int64_t from, std::int64_t to) {
  const std::int64_t first = at > from ? at : from;
  const std::int64_t end = at + static_cast<std::int64_t>(size) < to ? at + static_cast<std::int64_t>(size) : to;
  return {first, end - 1};
}

// A load of `size` bytes at p (in checked mode) returned poison or zone
// bytes only: reports and counts it if it read a quarantined block or a
// live block's red zone. `blocks`: where the strategy's blocks lie (R2).
GPUALLOC_INLINE void check_read(heap_header* h, const arena& blocks, const void* p, std::uint64_t size) {
  if (!blocks.contains(p)) return;
  checked_header fields;
  checked_header* header = header_below(blocks, p, &fields);
  if (header == nullptr) return;
  const unsigned char* user = user_of(header);
  const std::int64_t at = static_cast<const unsigned char*>(p) - user;
  // R2: the tag after the seal; a block freed or reused meanwhile shows here.
  const std::uint32_t tag = detail::device_atomic<std::uint32_t>(header->tag).load(detail::acquire);
  if (tag == block_freed) {
    const damage d = read_within(at, size, 0, static_cast<std::int64_t>(poisoned_bytes(fields.requested)));
    if (!d.any() || !first_to_report(header, damage_read_after_free)) return;
    const place freed = freed_place(header);
    report_damage(h, "heap-use-after-free", user, fields, d, &freed, finder::read, here(h));
    detail::device_atomic<std::uint64_t>(h->counters.use_after_frees).fetch_add(1, detail::relaxed);
    return;
  }
  if (tag != block_live) return;
  const auto body = static_cast<std::int64_t>(body_bytes(fields.requested));
  const auto zone = static_cast<std::int64_t>(zone_bytes);
  const damage under = read_within(at, size, -zone, 0);
  const damage over = read_within(at, size, static_cast<std::int64_t>(fields.requested), body + zone);
  std::uint64_t found = 0;
  if (under.any() && first_to_report(header, damage_read_underflow)) {
    report_damage(h, "heap-buffer-underflow", user, fields, under, nullptr, finder::read, here(h));
    ++found;
  }
  if (over.any() && first_to_report(header, damage_read_overflow)) {
    report_damage(h, "heap-buffer-overflow", user, fields, over, nullptr, finder::read, here(h));
    ++found;
  }
  if (found != 0) detail::device_atomic<std::uint64_t>(h->counters.overflows).fetch_add(found, detail::relaxed);
}

}  // namespace gpualloc::checked
