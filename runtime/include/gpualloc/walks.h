// Checked mode's walks over a heap, run between the program's kernels by
// libgpualloc's own kernel (__gpualloc_walk, runtime/src/init.cu), thread t
// of T taking every T-th word of the live map and slot of the quarantine:
//  - sweep, after each kernel of the program: the red zones of every live
//    block and the poison of every quarantined block are checked, and damage
//    not reported yet is reported and counted (checked.h C3), so a bug is
//    reported at the latest when the kernel that made it ends;
//  - census, when a context goes away: the live blocks counted, their bytes
//    summed and their sizes binned by powers of two;
//  - listing: the live blocks of at least `threshold` requested bytes, up to
//    most_leak_records of them, so the host can name the largest leaks.
// The result goes to the heap's walk_result (zeroed by the host first).
//
// Only blocks of the live map are seen: a strategy without an arena (`cuda`)
// has none, and its walks find nothing. A walk that runs beside a kernel of
// the program (another stream) may miss a block being made or freed; it
// never reports one that is not damaged (it re-reads the seal and the tag).
#pragma once

#include <cstdint>

#include "gpualloc/checked.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/heap.h"
#include "gpualloc/live_map.h"
#include "gpualloc/quarantine.h"

namespace gpualloc::checked {

enum class walk : int { sweep = 0, census = 1, listing = 2 };

inline constexpr std::uint32_t most_leak_records = 256;

struct leak_record {
  std::uint64_t address;    // the program's pointer
  std::uint64_t requested;  // its bytes
  place allocated;          // where it was allocated
  std::uint32_t unused[3];
};

struct walk_result {
  std::uint64_t threshold;          // listing: the smallest size listed (written by the host)
  std::uint64_t live_blocks;        // census
  std::uint64_t live_bytes;         // census
  std::uint64_t by_size[64];        // census: live blocks of [2^i, 2^(i+1)) requested bytes (0 B: i = 0)
  std::uint32_t records;            // listing: records found (may exceed most_leak_records)
  std::uint32_t unused;
  leak_record record[most_leak_records];
};
static_assert(sizeof(walk_result) <= walk_result_bytes, "heap.h's walk_result_bytes holds a walk's result");

GPUALLOC_INLINE std::uint32_t size_bin(std::uint64_t bytes) { return bytes == 0 ? 0 : detail::highest_bit(bytes); }

// One live block found by a walk (its header sealed and live).
GPUALLOC_INLINE void walk_live_block(heap_header* h, walk task, checked_header* header, const checked_header& fields,
                                     walk_result* out, const place& at) {
  auto add = [](std::uint64_t& field, std::uint64_t v) {
    detail::device_atomic<std::uint64_t>(field).fetch_add(v, detail::relaxed);
  };
  if (task == walk::sweep) {
    check_zones(h, header, fields, finder::sweep, at);
  } else if (task == walk::census) {
    add(out->live_blocks, 1);
    add(out->live_bytes, fields.requested);
    add(out->by_size[size_bin(fields.requested)], 1);
  } else if (fields.requested >= out->threshold) {
    const std::uint32_t i = detail::device_atomic<std::uint32_t>(out->records).fetch_add(1, detail::relaxed);
    if (i < most_leak_records)
      out->record[i] = {reinterpret_cast<std::uintptr_t>(user_of(header)), fields.requested,
                        {fields.kernel, {fields.block[0], fields.block[1], fields.block[2]}, fields.thread}, {}};
  }
}

// Thread `thread` of `threads`: its share of walk `task` over h.
GPUALLOC_INLINE void walk_heap(heap_header* h, walk task, std::uint64_t thread, std::uint64_t threads) {
  auto* out = static_cast<walk_result*>(h->checks.walk_result);
  // The sweep reports as "after" the kernel that ran last.
  const place at{detail::device_atomic<const std::uint32_t>(h->checks.kernel).load(detail::relaxed), {}, 0};
  for (std::uint64_t i = thread; i < h->checks.live_words; i += threads) {
    for (std::uint64_t bits = live_word(h, i); bits != 0; bits &= bits - 1) {
      checked_header* header = live_header(h, i, detail::lowest_bit(bits));
      checked_header fields;
      const bool live =
          sealed(header, &fields) &&
          detail::device_atomic<std::uint32_t>(header->tag).load(detail::acquire) == block_live;
      if (live) walk_live_block(h, task, header, fields, out, at);
    }
  }
  if (task != walk::sweep) return;
  for (std::uint64_t slot = thread; slot < h->checks.quarantine_slots; slot += threads) {
    const std::uint64_t held =
        detail::device_atomic<std::uint64_t>(h->checks.quarantine[slot]).load(detail::acquire);
    if (held != 0) check_freed_block(h, reinterpret_cast<checked_header*>(held), finder::sweep, at);
  }
}

}  // namespace gpualloc::checked
