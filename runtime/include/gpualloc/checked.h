// Checked mode's blocks (GPUALLOC_CHECK=1): a sealed header and red zones
// around what the program sees, so that the front end (allocate.h) can tell
// a block it handed out from anything else, and see writes past either end.
//
//   [ checked_header 64 B | front zone 16 B | requested bytes, slack | back zone 16 B ]
//                                           ^ the program's pointer (16-byte aligned)
//
// The slack (up to the next multiple of 16) belongs to the back zone, so a
// write of one byte past the requested size is seen. Both zones are filled
// with `zone_byte` when the block is handed out and checked when it is
// freed; a damaged zone is reported as an overflow (back) or underflow
// (front) with the offsets written, the block's size and the thread that
// allocated it, and the block is freed all the same (nothing is lost).
//
// Invariants
//  C1 A header is trusted only when its seal matches: a hash of its address,
//     the requested size and the allocating thread. Anything else at that
//     place (a pointer into the middle of a block, one from elsewhere, a
//     header overwritten by an underflow that ran past the front zone) fails
//     the test with overwhelming probability, and the free is reported and
//     skipped without reading further: a corrupted header never reaches the
//     strategy.
//  C2 The tag (live -> freed) changes only by compare-and-swap, so of two
//     frees of one block exactly one succeeds; the other is a double free
//     (also once the block left the quarantine: freed -> released, by the
//     one thread that took it out, quarantine.h Q4).
//     The sealed fields are written once, before the block is handed out;
//     the freeing place only by the free that won the tag, before the block
//     enters the quarantine (quarantine.h); `reported` only by atomic or.
//  C3 A kind of damage is reported once per block: whoever finds it first
//     (a free, the sweep after a kernel, the quarantine's eviction) sets its
//     bit in `reported` and reports only if the bit was clear.
//
// Memory ordering: the header's fields are relaxed atomics (a buggy program
// may free a block while another thread frees or reuses it: reads must not
// be data races); the free's tag compare-and-swap is acq_rel, as in
// allocate.h, so the strategy's free comes after every write of the owner.
#pragma once

#include <cstdint>
#include <cstdio>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/heap.h"

namespace gpualloc {

// A tracked block's tag (checked mode's header and the statistics' one, allocate.h).
inline constexpr std::uint32_t block_live = 0x6576696cu;   // "live"
inline constexpr std::uint32_t block_freed = 0x65657266u;  // "free"
// Checked mode: freed, out of the quarantine and back with the strategy (quarantine.h Q4).
inline constexpr std::uint32_t block_released = 0x6b636162u;  // "back"

}  // namespace gpualloc

namespace gpualloc::checked {

inline constexpr unsigned char zone_byte = 0xc5;           // what a red zone holds
inline constexpr std::uint64_t zone_bytes = 16;            // each red zone, at least
inline constexpr std::uint64_t zone_word = 0x0101010101010101ull * zone_byte;  // eight zone bytes

// The allocating thread: its block and its thread index.
struct thread_place {
  std::uint32_t block[3];
  std::uint32_t thread[3];
};

// The kinds of damage a block can have, bits of checked_header::reported (C3).
enum damage_kind : std::uint32_t {
  damage_underflow = 1u << 0,
  damage_overflow = 1u << 1,
  damage_use_after_free = 1u << 2,
  damage_read_underflow = 1u << 3,  // the read check's (read_check.h)
  damage_read_overflow = 1u << 4,
  damage_read_after_free = 1u << 5,
};

struct checked_header {
  std::uint64_t requested;     // bytes the program asked for
  std::uint32_t tag;           // block_live, block_freed or block_released
  std::uint32_t seal;          // C1: over the address, `requested` and the allocating place
  std::uint32_t block[3];      // allocating block (x, y, z)
  std::uint32_t thread;        // allocating thread: x | y << 10 | z << 20
  std::uint32_t kernel;        // allocating kernel: its slot in the heap's kernel names
  std::uint32_t freed_kernel;  // freeing kernel, block and thread (once freed)
  std::uint32_t freed_block[3];
  std::uint32_t freed_thread;
  std::uint32_t reported;      // damage_kind bits already reported (C3)
  std::uint32_t unused;
};
static_assert(sizeof(checked_header) == 64);

// Bytes in front of the program's pointer, from it to the back zone, and in
// all, for a request of `size`.
inline constexpr std::uint64_t front_bytes = sizeof(checked_header) + zone_bytes;
GPUALLOC_INLINE std::uint64_t body_bytes(std::uint64_t size) { return round_up(size == 0 ? 1 : size, min_alignment); }
GPUALLOC_INLINE std::uint64_t block_bytes(std::uint64_t size) { return front_bytes + body_bytes(size) + zone_bytes; }

// The back zone's two words (16-byte aligned, as the program's pointer);
// the front zone's are the two before the program's pointer. Written and
// checked a word at a time (bytes only where a word says damage): 2^20
// checked 16 B allocations took 1.24 ms byte by byte, 0.96 ms so (H200,
// atomic, measured together with allocate.h's tracked free out of line;
// unchecked: 0.034 ms).
GPUALLOC_INLINE std::uint64_t* zone_words(const void* p, std::uint64_t size) {
  return reinterpret_cast<std::uint64_t*>(const_cast<unsigned char*>(static_cast<const unsigned char*>(p)) +
                                          body_bytes(size));
}

GPUALLOC_INLINE thread_place this_thread() {
#if GPUALLOC_ON_DEVICE
  return {{blockIdx.x, blockIdx.y, blockIdx.z}, {threadIdx.x, threadIdx.y, threadIdx.z}};
#else
  return {};
#endif
}

GPUALLOC_INLINE std::uint32_t pack_thread(const thread_place& t) {
  return (t.thread[0] & 0x3ff) | (t.thread[1] & 0x3ff) << 10 | (t.thread[2] & 0x3f) << 20;
}

// C1: a 32-bit hash (splitmix64's finaliser) of the header's address and its fixed fields.
GPUALLOC_INLINE std::uint32_t seal_of(const checked_header* h, std::uint64_t requested, const std::uint32_t block[3],
                                      std::uint32_t thread, std::uint32_t kernel) {
  std::uint64_t x = reinterpret_cast<std::uintptr_t>(h) ^ requested * 0x9e3779b97f4a7c15ull ^ kernel;
  x ^= (std::uint64_t{block[0]} << 32 | block[1]) * 0xbf58476d1ce4e5b9ull;
  x ^= (std::uint64_t{block[2]} << 32 | thread) * 0x94d049bb133111ebull;
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<std::uint32_t>(x ^ x >> 32);
}

// Where a heap event happened: the kernel (its slot in the heap's kernel
// names), the block and the thread (packed as in checked_header).
struct place {
  std::uint32_t kernel;
  std::uint32_t block[3];
  std::uint32_t thread;
};

GPUALLOC_INLINE place here(const heap_header* h) {
  const thread_place t = this_thread();
  const std::uint32_t kernel = detail::device_atomic<const std::uint32_t>(h->checks.kernel).load(detail::relaxed);
  return {kernel, {t.block[0], t.block[1], t.block[2]}, pack_thread(t)};
}

// A live block of `size` bytes at `block` (block_bytes(size) of them),
// allocated at `at`: its header and zones written. Returns the program's pointer.
GPUALLOC_INLINE void* make_block(void* block, std::uint64_t size, const place& at) {
  auto* h = static_cast<checked_header*>(block);
  auto store = [](std::uint32_t& field, std::uint32_t v) {
    detail::device_atomic<std::uint32_t>(field).store(v, detail::relaxed);
  };
  detail::device_atomic<std::uint64_t>(h->requested).store(size, detail::relaxed);
  for (int i = 0; i < 3; ++i) store(h->block[i], at.block[i]);
  store(h->thread, at.thread);
  store(h->kernel, at.kernel);
  store(h->reported, 0);
  store(h->seal, seal_of(h, size, at.block, at.thread, at.kernel));
  store(h->tag, block_live);
  unsigned char* user = static_cast<unsigned char*>(block) + front_bytes;
  for (std::uint64_t i = size; i < body_bytes(size); ++i) user[i] = zone_byte;  // the slack, under 16 bytes
  std::uint64_t* front = reinterpret_cast<std::uint64_t*>(user) - 2;
  std::uint64_t* back = zone_words(user, size);
  front[0] = front[1] = back[0] = back[1] = zone_word;
  return user;
}

// The header in front of the program's pointer p, and back.
GPUALLOC_INLINE checked_header* header_of(void* p) {
  return reinterpret_cast<checked_header*>(static_cast<unsigned char*>(p) - front_bytes);
}
GPUALLOC_INLINE unsigned char* user_of(checked_header* h) { return reinterpret_cast<unsigned char*>(h) + front_bytes; }

// C1: whether h is a header this front end wrote (its sealed fields, read
// once, in *out).
GPUALLOC_INLINE bool sealed(checked_header* h, checked_header* out) {
  auto load = [](std::uint32_t& field) { return detail::device_atomic<std::uint32_t>(field).load(detail::relaxed); };
  out->requested = detail::device_atomic<std::uint64_t>(h->requested).load(detail::relaxed);
  for (int i = 0; i < 3; ++i) out->block[i] = load(h->block[i]);
  out->thread = load(h->thread);
  out->kernel = load(h->kernel);
  out->seal = load(h->seal);
  return out->requested < (std::uint64_t{1} << 56) &&
         out->seal == seal_of(h, out->requested, out->block, out->thread, out->kernel);
}

// The freeing place, recorded by the free that won the tag (C2).
GPUALLOC_INLINE void record_free(checked_header* h, const place& at) {
  auto store = [](std::uint32_t& field, std::uint32_t v) {
    detail::device_atomic<std::uint32_t>(field).store(v, detail::relaxed);
  };
  store(h->freed_kernel, at.kernel);
  for (int i = 0; i < 3; ++i) store(h->freed_block[i], at.block[i]);
  store(h->freed_thread, at.thread);
}
GPUALLOC_INLINE place freed_place(checked_header* h) {
  auto load = [](std::uint32_t& field) { return detail::device_atomic<std::uint32_t>(field).load(detail::relaxed); };
  return {load(h->freed_kernel), {load(h->freed_block[0]), load(h->freed_block[1]), load(h->freed_block[2])},
          load(h->freed_thread)};
}

// C3: whether the caller is the first to find damage of `kind` in h (and so reports it).
GPUALLOC_INLINE bool first_to_report(checked_header* h, damage_kind kind) {
  return (detail::device_atomic<std::uint32_t>(h->reported).fetch_or(kind, detail::relaxed) & kind) == 0;
}

// Damaged bytes of a block, as offsets from the program's pointer.
struct damage {
  std::int64_t first = 0, last = -1;  // the lowest and highest damaged offsets (none: last < first)
  GPUALLOC_HD bool any() const { return last >= first; }
};

// The bytes at offsets [from, to) of p that do not hold `expected`.
GPUALLOC_INLINE damage damage_in(const void* p, std::int64_t from, std::int64_t to, unsigned char expected) {
  const auto* user = static_cast<const unsigned char*>(p);
  damage d;
  for (std::int64_t i = from; i < to; ++i)
    if (user[i] != expected) {
      if (!d.any()) d.first = i;
      d.last = i;
    }
  return d;
}

// The damage in the front zone (offsets -16 .. -1) or in the back zone
// (requested .. the end of the slack + 16) of a block of `requested` bytes.
GPUALLOC_INLINE damage front_damage(const void* p) {
  const auto* words = static_cast<const std::uint64_t*>(p);
  if (words[-2] == zone_word && words[-1] == zone_word) return {};
  return damage_in(p, -static_cast<std::int64_t>(zone_bytes), 0, zone_byte);
}
GPUALLOC_INLINE damage back_damage(const void* p, std::uint64_t requested) {
  const auto* user = static_cast<const unsigned char*>(p);
  const std::uint64_t body = body_bytes(requested);
  bool intact = zone_words(p, requested)[0] == zone_word && zone_words(p, requested)[1] == zone_word;
  for (std::uint64_t i = requested; i < body; ++i) intact &= user[i] == zone_byte;
  if (intact) return {};
  return damage_in(p, static_cast<std::int64_t>(requested), static_cast<std::int64_t>(body + zone_bytes), zone_byte);
}

// A kernel's name as the host wrote it into the heap ("?" for none).
GPUALLOC_INLINE const char* kernel_name(const heap_header* h, std::uint32_t slot) {
  const char* name = h->checks.kernel_names + std::uint64_t{slot % kernel_name_slots} * kernel_name_bytes;
  return h->checks.kernel_names != nullptr && name[0] != 0 ? name : "?";
}

// Who found damage: the free or eviction at `at`, the sweep after the
// kernel at.kernel, or the read at `at` (read_check.h).
enum class finder : std::uint8_t { free, eviction, sweep, read };

// How a report says who found the damage at a place (all but the sweep).
GPUALLOC_INLINE const char* found_at(finder by) {
  return by == finder::free ? "found by the free in" : by == finder::eviction ? "found by the quarantine's eviction in" : "read by";
}

// Reports damage of `what` (e.g. "heap-buffer-overflow") in the block whose
// program's pointer is p and header fields h (freed: also where it was
// freed): bytes d written, or read (finder::read).
GPUALLOC_INLINE void report_damage(const heap_header* heap, const char* what, const void* p, const checked_header& h,
                                   const damage& d, const place* freed, finder by, const place& at) {
  const char* done = by == finder::read ? "read" : "written";
#if GPUALLOC_ON_DEVICE
  const std::uint32_t t = h.thread, a = at.thread;
  const auto size = static_cast<unsigned long long>(h.requested);
  const auto first = static_cast<long long>(d.first), last = static_cast<long long>(d.last);
  if (freed != nullptr) {
    const std::uint32_t f = freed->thread;
    if (by == finder::sweep)
      printf("gpualloc: %s of the %llu-byte block at %p: bytes %lld .. %lld %s after its free (allocated by kernel %s "
             "block (%u,%u,%u) thread (%u,%u,%u); freed by kernel %s block (%u,%u,%u) thread (%u,%u,%u)); found by "
             "the sweep after kernel %s\n",
             what, size, p, first, last, done, kernel_name(heap, h.kernel), h.block[0], h.block[1], h.block[2],
             t & 0x3ff, t >> 10 & 0x3ff, t >> 20 & 0x3f, kernel_name(heap, freed->kernel), freed->block[0],
             freed->block[1], freed->block[2], f & 0x3ff, f >> 10 & 0x3ff, f >> 20 & 0x3f, kernel_name(heap, at.kernel));
    else
      printf("gpualloc: %s of the %llu-byte block at %p: bytes %lld .. %lld %s after its free (allocated by kernel %s "
             "block (%u,%u,%u) thread (%u,%u,%u); freed by kernel %s block (%u,%u,%u) thread (%u,%u,%u)); %s kernel "
             "%s block (%u,%u,%u) thread (%u,%u,%u)\n",
             what, size, p, first, last, done, kernel_name(heap, h.kernel), h.block[0], h.block[1], h.block[2],
             t & 0x3ff, t >> 10 & 0x3ff, t >> 20 & 0x3f, kernel_name(heap, freed->kernel), freed->block[0],
             freed->block[1], freed->block[2], f & 0x3ff, f >> 10 & 0x3ff, f >> 20 & 0x3f, found_at(by),
             kernel_name(heap, at.kernel), at.block[0], at.block[1], at.block[2], a & 0x3ff, a >> 10 & 0x3ff,
             a >> 20 & 0x3f);
    return;
  }
  if (by == finder::sweep)
    printf("gpualloc: %s of the %llu-byte block at %p: bytes %lld .. %lld %s (allocated by kernel %s block (%u,%u,%u) "
           "thread (%u,%u,%u)); found by the sweep after kernel %s\n",
           what, size, p, first, last, done, kernel_name(heap, h.kernel), h.block[0], h.block[1], h.block[2], t & 0x3ff,
           t >> 10 & 0x3ff, t >> 20 & 0x3f, kernel_name(heap, at.kernel));
  else
    printf("gpualloc: %s of the %llu-byte block at %p: bytes %lld .. %lld %s (allocated by kernel %s block (%u,%u,%u) "
           "thread (%u,%u,%u)); %s kernel %s block (%u,%u,%u) thread (%u,%u,%u)\n",
           what, size, p, first, last, done, kernel_name(heap, h.kernel), h.block[0], h.block[1], h.block[2], t & 0x3ff,
           t >> 10 & 0x3ff, t >> 20 & 0x3f, found_at(by), kernel_name(heap, at.kernel), at.block[0], at.block[1],
           at.block[2], a & 0x3ff, a >> 10 & 0x3ff, a >> 20 & 0x3f);
#else
  (void)heap, (void)freed, (void)at;
  std::fprintf(stderr, "gpualloc: %s of the %llu-byte block at %p: bytes %lld .. %lld %s\n", what,
               static_cast<unsigned long long>(h.requested), p, static_cast<long long>(d.first),
               static_cast<long long>(d.last), done);
#endif
}

// Reports and counts the damage to the zones of the block with `header`
// (fields: its sealed fields), each kind once per block (C3).
GPUALLOC_INLINE void check_zones(heap_header* heap, checked_header* header, const checked_header& fields, finder by,
                                 const place& at) {
  const void* p = user_of(header);
  const damage front = front_damage(p), back = back_damage(p, fields.requested);
  std::uint64_t found = 0;
  if (front.any() && first_to_report(header, damage_underflow)) {
    report_damage(heap, "heap-buffer-underflow", p, fields, front, nullptr, by, at);
    ++found;
  }
  if (back.any() && first_to_report(header, damage_overflow)) {
    report_damage(heap, "heap-buffer-overflow", p, fields, back, nullptr, by, at);
    ++found;
  }
  if (found != 0) detail::device_atomic<std::uint64_t>(heap->counters.overflows).fetch_add(found, detail::relaxed);
}

}  // namespace gpualloc::checked
