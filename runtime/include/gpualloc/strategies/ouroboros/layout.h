// Where Ouroboros keeps things in its arena, and the names for them.
//
//   arena: [ controls | free-chunk tree | descriptors | per-chunk arrays | large units | queue rings | chunks ... ]
//
//  controls      the pool's counters, then one queue_control per page size
//                (five cache lines: the hot counters each on its own)
//  free-chunk    a 64-ary bit tree (detail/bit_tree.h) of the chunks that are
//  tree          free: single chunks come from at or near its low end,
//                runs (chunks of three, chunks for large blocks) from its high end
//  descriptors   one word per chunk: what the chunk is now (free, pages of a
//                size, a queue chunk, large blocks' units); kept outside the
//                chunks, so chunks hold nothing but user data or queue slots
//                and a run of chunks is one contiguous space
//  per-chunk     what the queue contents and the queue storage keep per chunk
//  arrays        (page bit-fields, queue-chunk counters, the drain's lists),
//                and after the contents' arrays what they keep besides (the
//                C variants' per-SM chunk hints)
//  large units   a second bit tree, one bit per KiB of the chunk area, and a
//                length per KiB (large.h)
//  queue rings   the static queues' slots (S), the chunk-pointer arrays (VA),
//                or the mailbox of chunks made in advance and the walk hints (VL)
//  chunks        8 KiB each, addressed by index
//
// Everything is a pure function of the arena's size and the variant, computed
// once by the strategy's plan (ouroboros.h) and kept in its state.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpualloc/config.h"
#include "gpualloc/detail/atomic.h"
#include "gpualloc/detail/bit_tree.h"
#include "gpualloc/detail/bits.h"
#include "gpualloc/detail/bulk_semaphore.h"
#include "gpualloc/detail/index_queue.h"

namespace gpualloc::strategies::ouro {

inline constexpr unsigned chunk_shift = 13;  // 8 KiB chunks
inline constexpr std::uint64_t chunk_bytes = std::uint64_t{1} << chunk_shift;
inline constexpr unsigned page_index_bits = 9;  // at most 512 pages on a chunk
// A page's queue entry is chunk << 9 | page in 32 bits, all ones being the
// deletion marker: so at most 2^23 - 1 chunks (64 GiB); a larger arena
// leaves the rest unused.
inline constexpr std::uint32_t max_chunks = (1u << (32 - page_index_bits)) - 1;
inline constexpr std::uint32_t no_chunk = ~0u;

// Page sizes, one queue each. Two Ouroboros instances (section 3.1: "multiple
// instances with multiples of the base chunk size can be combined"):
//   c = 0 .. 9    the base instance: 8 KiB chunks of 16 B << c, the paper's ten halvings;
//   c = 10 .. 14  an instance whose chunk is three base chunks (24 KiB, taken
//                 as a run), of 384 B << (c - 10): 384 B .. 6 KiB, the sizes
//                 halfway between two halvings, so that a request above 256 B
//                 wastes at most a third of its page instead of half.
// "Chunk of size c" below means the instance's chunk: 1 or 3 base chunks.
inline constexpr unsigned base_classes = 10;
inline constexpr unsigned page_classes = 15;
inline constexpr unsigned min_page_shift = 4;  // 16 B

GPUALLOC_INLINE unsigned span_of(unsigned c) { return c < base_classes ? 1 : 3; }  // base chunks in its chunk
GPUALLOC_INLINE unsigned shift_of(unsigned c) { return c < base_classes ? min_page_shift + c : c - base_classes + 7; }
GPUALLOC_INLINE std::uint64_t page_bytes(unsigned c) { return std::uint64_t{span_of(c)} << shift_of(c); }
GPUALLOC_INLINE std::uint32_t pages_per_chunk(unsigned c) {
  return c < base_classes ? (1u << page_index_bits) >> c : 64u >> (c - base_classes);
}

// The smallest page that holds `bytes` (16 <= bytes <= chunk_bytes).
GPUALLOC_INLINE unsigned class_of(std::uint64_t bytes) {
  if (bytes <= (std::uint64_t{1} << min_page_shift)) return 0;
  const unsigned k = detail::ceil_log2(bytes);  // bytes in (2^(k-1), 2^k]
  const bool three_quarters = k >= 9 && k <= chunk_shift && bytes <= std::uint64_t{3} << (k - 2);
  return three_quarters ? base_classes + k - 9 : k - min_page_shift;
}

// A chunk's descriptor: [2:0] kind, [7:3] page size (pages) or queue (queue
// chunks), [63:8] which base chunk of its chunk it is (pages) or position in
// its queue (queue chunks).
struct descriptor {
  enum kind_t : std::uint64_t { free = 0, pages = 1, queue = 2, large = 3 };

  GPUALLOC_HD static std::uint64_t make(kind_t k, std::uint64_t sub, std::uint64_t payload) {
    return k | sub << 3 | payload << 8;
  }
  GPUALLOC_HD static kind_t kind(std::uint64_t d) { return static_cast<kind_t>(d & 7); }
  GPUALLOC_HD static unsigned sub(std::uint64_t d) { return static_cast<unsigned>(d >> 3 & 31); }
  GPUALLOC_HD static std::uint64_t payload(std::uint64_t d) { return d >> 8; }
};

// The pool of chunks (chunk_pool.h) and the reclaim lock (page queues' drain).
struct pool_control {
  alignas(128) std::int64_t available;  // shares of the free chunks not reserved for queue storage (chunk_pool.h)
  alignas(128) std::uint32_t reclaim_lock;
};

// One queue per page size: five cache lines.
struct queue_control {
  detail::bulk_semaphore sem;  // pages in the queue (page queues) / free pages on its chunks (chunk queues)
  detail::queue_ends ends;
  alignas(128) detail::fill_count fill;  // chunk queues: entries in the queue
  std::uint64_t list_front;              // linked queues: the chunk holding the front, as ordinal << 32 | chunk
  std::uint64_t list_back;               //                the chunk holding the back
  alignas(128) std::uint64_t slots;      // static queues: slots reserved; virtualised: 1 once the base is reserved (storage.h)
  std::uint64_t list_old;                // linked queues: the oldest chunk not yet recycled
  std::uint64_t drained;                 // page queues: pages a drain put back without freeing a chunk
};

struct layout {
  std::uint64_t controls;                  // arena offset of pool_control, queue_control[page_classes]
  std::uint64_t tree;                      // free-chunk tree words
  std::uint64_t desc;                      // u64 per chunk
  std::uint64_t content;                   // the queue contents' per-chunk arrays
  std::uint64_t storage;                   // the queue storage's per-chunk arrays
  std::uint64_t large;                     // large blocks: free-unit tree words, then u32 per unit
  std::uint64_t ring[page_classes];        // S: slots; VA: chunk pointers; VL: mailbox, walk hints
  std::uint64_t ring_mask[page_classes];   // entries in ring[c] - 1 (a power of two minus one)
  std::uint64_t slot_limit[page_classes];  // static queues: slots a queue may ever have reserved
  std::uint64_t chunk_base;                // arena offset of chunk 0
  std::uint32_t chunks;                    // 0: the arena is too small for anything
  std::uint32_t reserved;
  detail::bit_tree_layout tree_layout;
  detail::bit_tree_layout unit_layout;  // large blocks' units (large.h)
};

// The arena as the strategy sees it: the layout and where the arena begins.
struct heap {
  const layout& L;
  std::byte* arena;

  template <class T>
  GPUALLOC_HD T* at(std::uint64_t offset) const {
    return reinterpret_cast<T*>(arena + offset);
  }
  GPUALLOC_HD pool_control& pool() const { return *at<pool_control>(L.controls); }
  GPUALLOC_HD queue_control& queue(unsigned c) const { return at<queue_control>(L.controls + sizeof(pool_control))[c]; }
  GPUALLOC_HD std::uint64_t& desc(std::uint32_t x) const { return at<std::uint64_t>(L.desc)[x]; }
  GPUALLOC_HD std::uint64_t load_desc(std::uint32_t x) const {
    return detail::device_atomic<std::uint64_t>(desc(x)).load(detail::acquire);
  }
  GPUALLOC_HD void store_desc(std::uint32_t x, std::uint64_t d) const {
    detail::device_atomic<std::uint64_t>(desc(x)).store(d, detail::release);
  }
  GPUALLOC_HD std::byte* chunk(std::uint32_t x) const {
    return arena + L.chunk_base + (std::uint64_t{x} << chunk_shift);
  }
  // The chunk an address of the chunk area lies in, and its offset there.
  GPUALLOC_HD std::uint64_t chunk_offset(const void* p) const {
    return static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - (arena + L.chunk_base));
  }
  GPUALLOC_HD detail::bit_tree free_chunks() const {
    return detail::bit_tree(at<std::uint64_t>(L.tree), L.tree_layout);
  }
};

GPUALLOC_INLINE std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace gpualloc::strategies::ouro
