// Ouroboros (Winter, Mlakar, Parger, Steinberger, "Ouroboros: Virtualized
// Queues for Dynamic Memory Management on GPUs", ICS 2020): the heap in
// equal chunks of 8 KiB addressed by index; a chunk serves as user pages of
// one size or as queue storage. Page sizes (layout.h): the paper's ten
// halvings from 16 B to 8 KiB, and five sizes from 384 B to 6 KiB halfway
// between them, on chunks of three base chunks (a second instance, as
// section 3.1 combines instances), one queue each.
// One template, two orthogonal choices, six variants:
//   what a queue holds  page_queues (P: free pages, page_queues.h) or
//                       chunk_queues (C: chunks with free pages, chunk_queues.h);
//   how it is stored    static_queue (S), array_queue (VA) or list_queue
//                       (VL): storage.h.
// Chunks come from a pool (chunk_pool.h) whose free set is a 64-ary bit tree;
// how the arena is laid out: layout.h.
//
// malloc(bytes): lanes of the group asking for the same page size are served
// together (one semaphore wait, one queue reservation for all of them);
// requests larger than a chunk are runs of 1 KiB units on chunks taken from
// the top of the pool (large.h; the original hands them to CUDA's allocator,
// here any size up to the heap is served from the heap). free(p): the
// chunk's descriptor says what p is: a page of some size (its queue's free)
// or part of a large block.
//
// Invariants (each part states its own):
//  O1 A chunk is, at any time, one of: free (in the pool's tree), part of a
//     chunk of pages of one size, a queue chunk, large blocks' units. Its
//     descriptor says which and changes only while the chunk is out of the
//     tree, by the thread that took it or gives it back.
//  O2 Every block handed out lies in one chunk of pages (a page) or in large
//     chunks (a run of units), whose descriptors say so until it is freed.
//  O3 A request the heap cannot serve returns NULL after the pool said no
//     (page queues first drain stranded chunks, page_queues.h) and changes
//     nothing else: reservations it made are given back.
//
// Memory ordering: see the parts. Descriptors are stored with release and
// loaded with acquire; a block's bytes travel through the queue slot, bit or
// tree operation that handed it on.
#pragma once

#include <cstdint>

#include "gpualloc/detail/bit_tree.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/heap.h"
#include "gpualloc/strategies/ouroboros/chunk_pool.h"
#include "gpualloc/strategies/ouroboros/chunk_queues.h"
#include "gpualloc/strategies/ouroboros/large.h"
#include "gpualloc/strategies/ouroboros/layout.h"
#include "gpualloc/strategies/ouroboros/page_queues.h"
#include "gpualloc/strategies/ouroboros/storage.h"
#include "gpualloc/strategy.h"

namespace gpualloc::strategies {

template <template <class Storage> class Content, class Storage>
struct ouroboros {
  using content = Content<Storage>;
  using entry = typename content::entry;

  struct state {
    ouro::layout L;
  };

  static constexpr int init_phases = 1;

  static void plan(state& s, const arena& a, const device_facts&) { s.L = layout_for(a.bytes); }

  // Grid-stride: the controls (thread 0), the free-chunk tree (every chunk
  // free), the descriptors, the parts' arrays.
  GPUALLOC_HD static void init(state& s, const arena& a, int /*phase*/, std::uint64_t thread, std::uint64_t threads) {
    const ouro::heap h{s.L, a.begin};
    const ouro::layout& L = s.L;
    if (L.chunks == 0) return;  // too small an arena even for the controls
    if (thread == 0) {
      auto* words = h.at<std::uint64_t>(L.controls);
      for (std::uint64_t i = 0; i < controls_bytes / sizeof(std::uint64_t); ++i) words[i] = 0;
      h.pool().available = std::int64_t{L.chunks} << ouro::chunk_pool::share_shift;
      for (unsigned c = 0; c < ouro::page_classes; ++c) {
        ouro::queue_control& q = h.queue(c);
        q.list_front = q.list_back = q.list_old = ouro::list_queue::none;
      }
    }
    auto* tree = h.at<std::uint64_t>(L.tree);
    for (std::uint64_t w = thread; w < L.tree_layout.words; w += threads) tree[w] = L.tree_layout.initial_word(w, true);
    for (std::uint64_t x = thread; x < L.chunks; x += threads) h.desc(static_cast<std::uint32_t>(x)) = 0;
    content::init(h, thread, threads);
    Storage::template init<entry>(h, thread, threads);
    ouro::large_blocks::init(h, thread, threads);
  }

  GPUALLOC_HD static void* malloc(state& s, const arena& a, std::uint64_t bytes, const detail::lane_group& group) {
    const ouro::heap h{s.L, a.begin};
    if (s.L.chunks == 0) return nullptr;
    const unsigned key = bytes > ouro::chunk_bytes ? ouro::page_classes : ouro::class_of(bytes);
    const detail::lane_group g = group.partition(key);
    if (key == ouro::page_classes) return ouro::large_blocks::malloc(h, bytes, [&] { return content::reclaim(h); });
    return content::malloc(h, key, g);
  }

  GPUALLOC_HD static void free(state& s, const arena& a, void* p, const detail::lane_group& group) {
    const ouro::heap h{s.L, a.begin};
    const std::uint64_t offset = h.chunk_offset(p);
    const auto x = static_cast<std::uint32_t>(offset >> ouro::chunk_shift);
    const std::uint64_t d = x < s.L.chunks ? h.load_desc(x) : 0;
    const bool pages = ouro::descriptor::kind(d) == ouro::descriptor::pages;
    const unsigned c = ouro::descriptor::sub(d);
    const auto first = static_cast<std::uint32_t>(x - ouro::descriptor::payload(d));  // of its chunk of three
    const detail::lane_group g = group.partition(pages ? content::free_key(c, first) : ~std::uint64_t{0});
    if (pages) {
      const std::uint64_t in_chunk = (offset - (std::uint64_t{first} << ouro::chunk_shift)) >> ouro::shift_of(c);
      content::free(h, c, first, static_cast<std::uint32_t>(ouro::span_of(c) == 1 ? in_chunk : in_chunk / 3), g);
    } else if (ouro::descriptor::kind(d) == ouro::descriptor::large) {
      ouro::large_blocks::free(h, offset >> ouro::large_blocks::unit_shift);
    }
  }

 private:
  static constexpr std::uint64_t controls_bytes =
      sizeof(ouro::pool_control) + ouro::page_classes * sizeof(ouro::queue_control);

  // The layout with `chunks` chunks; chunk_base past the arena if they do not fit.
  static ouro::layout layout_with(std::uint64_t arena_bytes, std::uint32_t chunks) {
    ouro::layout L{};
    L.chunks = chunks;
    L.controls = 0;
    std::uint64_t end = controls_bytes;
    L.tree_layout = detail::bit_tree_layout::make(chunks);
    L.tree = ouro::align_up(end, 128);
    end = L.tree + L.tree_layout.words * sizeof(std::uint64_t);
    L.desc = ouro::align_up(end, 128);
    end = L.desc + std::uint64_t{chunks} * sizeof(std::uint64_t);
    L.content = ouro::align_up(end, 128);
    end = L.content + std::uint64_t{chunks} * content::per_chunk_bytes + content::fixed_bytes;
    L.storage = ouro::align_up(end, 128);
    end = L.storage + std::uint64_t{chunks} * Storage::per_chunk_bytes;
    L.large = ouro::align_up(end, 128);
    end = L.large + ouro::large_blocks::plan(chunks, L.unit_layout);
    for (unsigned c = 0; c < ouro::page_classes; ++c) {
      const std::uint64_t entries = Storage::template ring_entries<entry>(content::max_entries(c, chunks), arena_bytes);
      L.ring[c] = ouro::align_up(end, 128);
      L.ring_mask[c] = entries == 0 ? 0 : entries - 1;
      L.slot_limit[c] = Storage::limited ? entries : ~std::uint64_t{0};
      end = L.ring[c] + entries * Storage::template ring_entry_bytes<entry>;
    }
    L.chunk_base = ouro::align_up(end, 4096);
    return L;
  }

  // As many chunks as fit with their metadata (binary search: metadata grows
  // with the chunks); none (every request says NULL) if not even one fits.
  static ouro::layout layout_for(std::uint64_t arena_bytes) {
    auto fits = [&](std::uint32_t n) {
      const ouro::layout L = layout_with(arena_bytes, n);
      return L.chunk_base + std::uint64_t{n} * ouro::chunk_bytes <= arena_bytes;
    };
    std::uint64_t most = arena_bytes / ouro::chunk_bytes;
    std::uint32_t lo = 0, hi = static_cast<std::uint32_t>(most < ouro::max_chunks ? most : ouro::max_chunks);
    while (lo < hi) {
      const std::uint32_t mid = lo + (hi - lo + 1) / 2;
      if (fits(mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    return layout_with(arena_bytes, lo);
  }
};

using ouroboros_p_s = ouroboros<ouro::page_queues, ouro::static_queue>;
using ouroboros_p_va = ouroboros<ouro::page_queues, ouro::array_queue>;
using ouroboros_p_vl = ouroboros<ouro::page_queues, ouro::list_queue>;
using ouroboros_c_s = ouroboros<ouro::chunk_queues, ouro::static_queue>;
using ouroboros_c_va = ouroboros<ouro::chunk_queues, ouro::array_queue>;
using ouroboros_c_vl = ouroboros<ouro::chunk_queues, ouro::list_queue>;

}  // namespace gpualloc::strategies
