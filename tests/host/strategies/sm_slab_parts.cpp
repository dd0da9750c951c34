// Host tests of sm-slab's parts, and its utilisation figures.
//
//  classes       class_of against every request size up to 1 MiB: the
//                smallest class that holds it, at most a fifth lost; object
//                index and offset are inverse over a whole span
//  layout        plans for heaps of 4 KiB .. 80 GiB and 1 .. 256 SMs: tables
//                in order inside the arena, at least two objects a block,
//                spans within their caps (the head's bitmap, 64 segments,
//                arena/256) and at least objects_wanted objects below them
//                unless the slot budget narrowed them (then narrow_objects),
//                the slots' spans within the budget (or one slot a class);
//                spans wider than objects_wanted (up to span_objects_roomy)
//                only with every budget kept and no span narrowed
//  blocks        one thread through a block's life (blocks.h): a fresh pass,
//                retirement, half freed and scavenged (Q3), a second pass
//                that hands out exactly the freed objects, all freed and
//                released to the tree (B2, Q2); for a one-segment block and
//                a span (tails say where their head is, and are free again
//                after); no free or retirement queues a block, however much
//                of it came back, until its class scavenges (Q1)
//  spans         threads claim aligned runs of 1 .. 64 segments from a
//                bit tree (bit_tree.h claim_aligned_from) and give them
//                back: aligned, never two owners, the tree whole at the end
//  idle blocks   threads use every class but 8 KiB and free it all, then
//                fill the heap with 8 KiB objects: the other classes' idle
//                current blocks come back (sm_slab.h P6), so the fill misses
//                less than a quarter of their bytes; objects disjoint; all
//                freed, the tree and the slots hold every segment; twice on
//                a 16 and a 64 MiB heap
//  churn near full  threads keep 90 % of the arena live in 16 B blocks
//                (no NULL: blocks.h Q3) and 80 % in 16 B .. 1 KiB ones (NULLs
//                counted) while they replace them; no granule owned twice
//  report        (--report) span, objects per block and slots per class on a
//                16 GiB and a 64 MiB heap planned for 132 SMs; utilisation
//                fresh and under churn (utilisation.h)
//  churn band    (--churn-band T, alone) the GPU conformance suite's churn
//                phase on CPU threads (utilisation.h)
//
// Usage: gpualloc-sm-slab-parts [--report] [--turnovers N] [--churn-band T [--promise P]...]
#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "gpualloc/strategies/sm_slab/sm_slab.h"
#include "host_test.h"
#include "utilisation.h"

#if HOST_TEST_TSAN
// Any race report fails the run.
extern "C" const char* __tsan_default_options() { return "halt_on_error=1"; }
#endif

namespace {

using namespace gpualloc::sm_slab_parts;
using gpualloc::strategy_id;

using host_test::failures;

void test_classes() {
  const layout L = layout::make(std::uint64_t{80} << 30, 132);  // 1 MiB segments: every class
  CHECK(L.segment_log2 == max_segment_log2 && L.classes == max_classes, "classes: an 80 GiB heap has %u classes", L.classes);
  for (std::uint32_t c = 0; c < L.classes; ++c) {
    const std::uint64_t size = class_bytes(c);
    CHECK(size % 16 == 0 && class_of(size) == c, "classes: class %u (%" PRIu64 " B) maps to %u", c, size, class_of(size));
    if (c > 0) CHECK(size > class_bytes(c - 1), "classes: class %u is not larger than %u", c, c - 1);
    CHECK((((L.segment_bytes() << L.cls[c].span_log2) - 1) >> class_shift(c)) < (1u << 29),
          "classes: class %u's offsets pass the reciprocal's range", c);
    for (std::uint32_t i : {0u, 1u, 2u, L.objects(c) / 3, L.objects(c) - 2, L.objects(c) - 1}) {
      if (i >= L.objects(c)) continue;
      const std::uint64_t offset = L.object_offset(c, i);
      CHECK(offset + size <= (L.segment_bytes() << L.cls[c].span_log2) && L.object_index(c, offset) == i &&
                (size < 32 || L.object_index(c, offset + size - 16) == i),
            "classes: object %u of class %u does not map back", i, c);
    }
  }
  for (std::uint64_t bytes = 16; bytes <= L.segment_bytes() / 2; bytes += 16) {
    const std::uint32_t c = class_of(bytes);
    CHECK(c < L.classes && class_bytes(c) >= bytes && (c == 0 || class_bytes(c - 1) < bytes) &&
              (bytes <= 64 || class_bytes(c) * 4 <= bytes * 5),
          "classes: %" PRIu64 " B gets class %u", bytes, c);
  }
  std::printf("classes: %u classes of 16 B .. %" PRIu64 " B, every request in its smallest class\n", L.classes,
              class_bytes(L.classes - 1));
}

void test_layouts() {
  int plans = 0;
  for (std::uint64_t bytes = 4096; bytes <= (std::uint64_t{80} << 30); bytes = bytes * 3 / 2)
    for (std::uint32_t sms : {1u, 16u, 132u, 256u}) {
      const layout L = layout::make(bytes, sms);
      ++plans;
      if (L.segments == 0) {
        CHECK(bytes < (std::uint64_t{64} << 10), "layout: %" PRIu64 " B on %u SMs has no segment", bytes, sms);
        continue;
      }
      CHECK(L.records_offset < L.bitmaps_offset && L.bitmaps_offset < L.slots_offset &&
                L.slots_offset < L.ends_offset && L.ends_offset < L.rings_offset && L.rings_offset < L.tree_offset &&
                L.tree_offset < L.data_offset && L.data_offset + (std::uint64_t{L.segments} << L.segment_log2) <= bytes,
            "layout: %" PRIu64 " B on %u SMs: tables out of order or past the arena", bytes, sms);
      CHECK(L.queue_mask + 1 >= L.segments, "layout: %" PRIu64 " B: a queue holds fewer than the segments", bytes);
      // The SMs' stretches (blocks.h search_start) lie in the heap, after
      // the words where single segments are searched wherever it has room.
      CHECK(L.stretch % 64 == 0 && L.spans_from % 64 == 0 &&
                (L.segments < layout::single_words_apart * 64 ? L.spans_from == 0
                                                               : L.spans_from == layout::single_words * 64) &&
                (L.spans_from == 0 ||
                 L.spans_from + std::uint64_t{L.stretch} * std::min<std::uint64_t>(sms, layout::hint_sms) <=
                     L.segments),
            "layout: %" PRIu64 " B on %u SMs: stretches of %u segments from %u past %u segments", bytes, sms,
            L.stretch, L.spans_from, L.segments);
      std::uint64_t buffered = 0, small = 0, slots = 0;  // small: the slots' bytes of classes up to 8 KiB
      std::uint32_t narrowed = 0;          // classes whose span the budget narrowed
      std::uint32_t wide = 0, wide_small = 0;  // classes (up to 8 KiB) whose span is wider than objects_wanted asks
      for (std::uint32_t c = 0; c < L.classes; ++c) {
        CHECK(L.objects(c) >= 2, "layout: %" PRIu64 " B: class %u holds %u objects a block", bytes, c, L.objects(c));
        const std::uint32_t m = L.cls[c].span_log2;
        const std::uint64_t size = class_bytes(c), span = L.segment_bytes() << m;
        CHECK(m <= max_span_log2 && L.objects(c) == span / size &&
                  L.objects(c) <= (std::uint64_t{64} << L.bitmap_words_log2) && (m == 0 || span <= bytes / 256),
              "layout: %" PRIu64 " B: class %u's span of 2^%u segments breaks a cap", bytes, c, m);
        if (L.objects(c) < objects_wanted(size) && m < max_span_log2 && size >= (std::uint64_t{32} << m) &&
            span * 2 <= bytes / 256) {
          CHECK(L.objects(c) >= narrow_objects,
                "layout: %" PRIu64 " B: class %u's span of 2^%u segments (%u objects) could grow", bytes, c, m,
                L.objects(c));
          ++narrowed;
        }
        // A span wider than objects_wanted asks holds at most span_objects_roomy's worth.
        const bool roomy = m > 0 && (span / 2) / size >= objects_wanted(size);
        CHECK(!roomy || (span / 2) / size < objects_wanted(size, span_objects_roomy),
              "layout: %" PRIu64 " B: class %u's span of 2^%u segments is wider than wanted", bytes, c, m);
        wide += roomy;
        wide_small += roomy && c < small_classes;
        const std::uint64_t n = L.cls[c].slot_mask + 1;
        CHECK((n & (n - 1)) == 0 && L.cls[c].first_slot == slots && L.cls[c].slot_blocks == 2 * (n < sms ? n : sms),
              "layout: %" PRIu64 " B: class %u's slots", bytes, c);
        // Wide blocks widen as far as the caps allow: the objects wanted, the head's bitmap, one tree word.
        const std::uint32_t e = L.cls[c].wide_most;
        const std::uint64_t wide_cap = std::min<std::uint64_t>(objects_wanted(size, span_objects_roomy),
                                                               std::uint64_t{64} << L.bitmap_words_log2);
        CHECK(e <= max_wide && m + e <= max_span_log2 && (e == 0 || (std::uint64_t{L.objects(c)} << e) <= wide_cap) &&
                  (e == max_wide || m + e == max_span_log2 || (std::uint64_t{L.objects(c)} << (e + 1)) > wide_cap),
              "layout: %" PRIu64 " B: class %u widens %u times", bytes, c, e);
        slots += n;
        const std::uint64_t held = (n < sms ? n : sms) * 2 << (L.segment_log2 + m);
        buffered += held;
        if (c < small_classes) small += held;
      }
      // Wide spans only where the slots have room: they narrow first (layout.h slots).
      CHECK((wide == 0 || (narrowed == 0 && buffered <= slot_budget(bytes))) &&
                (wide_small == 0 || small <= small_slot_budget(bytes)),
            "layout: %" PRIu64 " B on %u SMs keeps %u wide spans (%u up to 8 KiB) with the slots at %" PRIu64
            " B (%" PRIu64 " B up to 8 KiB)",
            bytes, sms, wide, wide_small, buffered, small);
      CHECK(slots == L.slot_count, "layout: slot count");
      CHECK(buffered <= slot_budget(bytes) || slots == L.classes,
            "layout: %" PRIu64 " B on %u SMs buffers %" PRIu64 " B in slots", bytes, sms, buffered);
      // Spans narrow only while the slots are over budget, and each step halves one class's share.
      CHECK(narrowed == 0 || buffered * 2 > slot_budget(bytes),
            "layout: %" PRIu64 " B on %u SMs narrowed %u spans with the slots at %" PRIu64 " B", bytes, sms, narrowed,
            buffered);
    }
  std::printf("layout: %d plans of 4 KiB .. 80 GiB on 1 .. 256 SMs\n", plans);
}

// One thread through a block's life (blocks.h B1, B2, Q2, Q3), of `bytes`
// objects on a heap of heap_bytes.
void test_block_life(std::uint64_t heap_bytes, std::uint64_t bytes) {
  utilisation::heap H(strategy_id::sm_slab, heap_bytes);
  const layout& L = gpualloc::state_of<gpualloc::strategies::sm_slab::state>(H.get()).L;
  const blocks B(L, H.get()->space.begin);
  const std::uint32_t c = class_of(bytes);
  std::uint32_t block = B.get(c);  // its pass started
  const std::uint32_t seg = slot_word::segment(block), wide = slot_word::wide(block);
  const std::uint32_t K = L.objects(c, wide), span = 1u << (L.cls[c].span_log2 + wide);
  bool fresh = slot_word::fresh(block);
  CHECK(seg != no_segment && fresh, "blocks: a block from the tree is not fresh");
  CHECK(seg % span == 0, "blocks: span at %u is not aligned to its %u segments", seg, span);
  for (std::uint32_t d = 1; d < span; ++d)
    CHECK(B.kind(seg + d) == tail_kind(c, d), "blocks: segment %u of a span does not name its head", d);
  std::vector<std::uint32_t> got;
  std::uint64_t at = 0;  // the slot word's position (sm_slab.h P1)
  for (bool done = false; !done; at += 32) {
    const claim r = B.take(seg, K, at, 32, fresh);
    for (std::uint32_t i = 0; i < 32; ++i)
      if ((r.got >> i) & 1) got.push_back(r.first + i);
    done = r.exhausted;
  }
  CHECK(got.size() == K, "blocks: a fresh pass handed out %zu of %u objects", got.size(), K);
  B.end_pass(block, c, at);
  std::uint32_t freed = 0;
  for (std::uint32_t i = 0; i < K; i += 2, ++freed) B.give_back(seg, i / 64, std::uint64_t{1} << (i % 64), 1);
  CHECK(B.scavenge(c), "blocks: a retired half-free block was not scavenged (Q3)");
  block = B.get(c);
  fresh = slot_word::fresh(block);
  CHECK(slot_word::segment(block) == seg && !fresh && slot_word::wide(block) == wide,
        "blocks: a half-free block is not the next one its class gets");
  std::uint32_t again = 0;
  at = 0;
  for (bool done = false; !done; at += 32) {
    const claim r = B.take(seg, K, at, 32, fresh);
    for (std::uint32_t i = 0; i < 32; ++i)
      if ((r.got >> i) & 1) {
        CHECK((r.first + i) % 2 == 0, "blocks: the second pass handed out live object %u", r.first + i);
        ++again;
      }
    done = r.exhausted;
  }
  CHECK(again == freed, "blocks: the second pass handed out %u objects, %u were free", again, freed);
  B.end_pass(block, c, at);
  for (std::uint32_t i = 0; i < K; ++i) B.give_back(seg, i / 64, std::uint64_t{1} << (i % 64), 1);
  const gpualloc::detail::bit_tree tree(reinterpret_cast<std::uint64_t*>(H.get()->space.begin + L.tree_offset), L.tree);
  for (std::uint32_t d = 0; d < span; ++d)
    CHECK(B.kind(seg + d) == kind_free && tree.next(seg + d) == seg + d,
          "blocks: a block with every object back is not released (segment %u)", d);
  std::printf("blocks: %" PRIu64 " B, a span of %u segments: a pass of %u objects, half freed and scavenged, a "
              "second pass of exactly those, released\n", bytes, span, K);
}

// Q1: a block with most of its objects back, some while a slot held it
// and some after its retirement, stays retired (its class's queue stays
// empty) until its class scavenges it (Q3).
void test_retired_until_scavenged(std::uint64_t heap_bytes, std::uint64_t bytes) {
  utilisation::heap H(strategy_id::sm_slab, heap_bytes);
  const layout& L = gpualloc::state_of<gpualloc::strategies::sm_slab::state>(H.get()).L;
  const blocks B(L, H.get()->space.begin);
  const std::uint32_t c = class_of(bytes);
  const std::uint32_t block = B.get(c);  // its pass started
  const std::uint32_t seg = slot_word::segment(block), K = L.objects(c, slot_word::wide(block));
  const bool fresh = slot_word::fresh(block);
  std::uint32_t taken = 0;
  std::uint64_t at = 0;
  for (bool done = false; !done; at += 32) {
    const claim r = B.take(seg, K, at, 32, fresh);
    taken += gpualloc::detail::popcount(r.got);
    done = r.exhausted;
  }
  CHECK(taken == K, "blocks: a fresh pass handed out %u of %u objects", taken, K);
  const std::uint32_t held = K / 4, back = K - 1;  // back while a slot held it, and in all
  for (std::uint32_t i = 0; i < held; ++i) B.give_back(seg, i / 64, std::uint64_t{1} << (i % 64), 1);
  B.end_pass(block, c, at);
  for (std::uint32_t i = held; i < back; ++i) B.give_back(seg, i / 64, std::uint64_t{1} << (i % 64), 1);
  CHECK(!B.any_queued(c), "blocks: a free or a retirement queued a block (Q1)");
  CHECK(B.scavenge(c) && B.any_queued(c), "blocks: a retired block with free objects was not scavenged (Q3)");
  const std::uint32_t again = B.get(c);
  CHECK(slot_word::segment(again) == seg && !slot_word::fresh(again),
        "blocks: the scavenged block is not the next one its class gets");
  std::printf("blocks: %" PRIu64 " B: a block retired with %u of %u objects free stays retired until scavenged\n",
              bytes, back, K);
}

// Wide blocks (layout.h, blocks.h get): a class whose span the slot budget
// narrowed gets blocks 2^wide times as wide while every block its slots may
// hold at that width fits in half of the free segments two leaf words at
// random suggest (bit_tree.h estimate_size), narrower ones as the tree empties,
// down to its own span once the room is gone; each aligned to its width,
// and every segment back in the tree once all are released. Once every
// class has taken a span (classes_seen), none widens on the full tree.
void test_wide_blocks(std::uint64_t heap_bytes, std::uint64_t bytes) {
  utilisation::heap H(strategy_id::sm_slab, heap_bytes);
  std::byte* const arena = H.get()->space.begin;
  const layout& L = gpualloc::state_of<gpualloc::strategies::sm_slab::state>(H.get()).L;
  const blocks B(L, arena);
  const std::uint32_t c = class_of(bytes), m = L.cls[c].span_log2;
  const gpualloc::detail::bit_tree tree(reinterpret_cast<std::uint64_t*>(arena + L.tree_offset), L.tree);
  const auto in_tree = [&] {
    std::uint32_t n = 0;
    for (std::uint32_t i = tree.next(0); i != gpualloc::detail::bit_tree::none; i = tree.next(i + 1)) ++n;
    return n;
  };
  CHECK(L.cls[c].wide_most > 0, "wide blocks: %" PRIu64 " B on %" PRIu64 " MiB cannot widen", bytes, heap_bytes >> 20);
  const std::uint64_t full = tree.estimate_size(0, tree.leaf_words() - 1);  // the last word holds the rest
  CHECK(full >= L.segments / 2 && full <= L.segments + 64,
        "wide blocks: a full tree of %u segments looks like %" PRIu64, L.segments, full);
  std::vector<std::uint32_t> got;
  std::uint32_t widths = 0;  // bit w: a block widened w times
  for (;;) {
    const std::uint32_t block = B.get(c, true);
    if (slot_word::segment(block) == no_segment) break;
    const std::uint32_t wide = slot_word::wide(block);
    CHECK(wide <= L.cls[c].wide_most && slot_word::segment(block) % (1u << (m + wide)) == 0,
          "wide blocks: a block of class %u widened %u times at segment %u", c, wide, slot_word::segment(block));
    widths |= 1u << wide;
    got.push_back(block);
  }
  CHECK(slot_word::wide(got.front()) == L.cls[c].wide_most && slot_word::wide(got.back()) == 0 &&
            in_tree() < (1u << m),  // what is left holds no aligned span
        "wide blocks: the first block widened %u times, the last %u; %u segments left in the tree",
        slot_word::wide(got.front()), slot_word::wide(got.back()), in_tree());
  for (const std::uint32_t block : got) B.end_pass(block, c, 0);  // none taken: each released (B2)
  CHECK(in_tree() == L.segments, "wide blocks: all released, the tree has %u of %u segments", in_tree(), L.segments);
  // Every class in use (each took a fresh span): the next wide span would
  // let all their slots hold more than half the heap, so none widens.
  for (std::uint32_t k = 0; k < L.classes; ++k) B.end_pass(B.get(k), k, 0);
  const std::uint32_t after = B.get(c, true);
  CHECK(slot_word::wide(after) == 0 && in_tree() == L.segments - (1u << m),
        "wide blocks: with all %u classes in use a block widened %u times", L.classes, slot_word::wide(after));
  B.end_pass(after, c, 0);
  std::printf("wide blocks: %" PRIu64 " B on %" PRIu64 " MiB: %zu blocks until the tree was empty, widened 0 .. %u "
              "times (widths seen: %#x), the first %u objects; all back in the tree; none with every class in use\n",
              bytes, heap_bytes >> 20, got.size(), L.cls[c].wide_most, widths,
              L.objects(c, slot_word::wide(got.front())));
}

// Segments the slot pairs of classes other than `skip` hold in `current`
// (`next` too if with_next); read while no thread runs.
std::uint64_t held_by_slots(const layout& L, std::byte* arena, std::uint32_t skip, bool with_next) {
  const auto* pairs = reinterpret_cast<const slot_pair*>(arena + L.slots_offset);
  const auto span = [&](std::uint64_t w, std::uint32_t c) -> std::uint64_t {
    return slot_word::segment(w) == no_segment ? 0 : std::uint64_t{1} << (L.cls[c].span_log2 + slot_word::wide(w));
  };
  std::uint64_t segments = 0;
  for (std::uint32_t c = 0; c < L.classes; ++c)
    for (std::uint32_t i = L.cls[c].first_slot; c != skip && i <= L.cls[c].first_slot + L.cls[c].slot_mask; ++i)
      segments += span(pairs[i].current, c) + (with_next ? span(pairs[i].next, c) : 0);
  return segments;
}

// Whether blocks of (address, bytes) overlap or leave the data; sorts them.
bool overlap(std::vector<std::pair<std::uintptr_t, std::uint64_t>>& got, const layout& L, std::byte* arena) {
  std::sort(got.begin(), got.end());
  const auto data = reinterpret_cast<std::uintptr_t>(arena + L.data_offset);
  const std::uintptr_t end = data + (std::uint64_t{L.segments} << L.segment_log2);
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i].first < data || got[i].first + got[i].second > end ||
        (i > 0 && got[i - 1].first + got[i - 1].second > got[i].first))
      return true;
  return false;
}

// sm_slab.h P6: `threads` threads allocate objects of every class but
// 8 KiB (about 0.6 of a block per slot, so that passes cross K/2 and
// prefetch), then free them all: the slots keep current (and next) blocks
// with no live object, the rest of the heap is back in the tree. Then they
// fill the heap with 8 KiB objects until each one's first NULL. Without P6
// the other classes' current blocks stay out of reach, so the fill misses
// what whole 8 KiB spans hold by at least their bytes; with it, the fill
// must miss less than a quarter of them (it misses nothing), and those
// slots are empty after. Everything handed out is disjoint; all freed, the
// tree and the slots hold every segment. Twice on one heap: after P6 closed
// its blocks, the heap works as before.
void test_idle_blocks_return(std::uint64_t heap_bytes, int threads) {
  constexpr std::uint64_t size = 8192;
  utilisation::heap H(strategy_id::sm_slab, heap_bytes);
  std::byte* const arena = H.get()->space.begin;
  const layout& L = gpualloc::state_of<gpualloc::strategies::sm_slab::state>(H.get()).L;
  const std::uint32_t fc = class_of(size);
  const std::uint64_t usable = (L.segments >> L.cls[fc].span_log2) * L.objects(fc) * size;  // whole aligned spans
  using blocks_t = std::vector<std::pair<std::uintptr_t, std::uint64_t>>;
  const auto on_threads = [&](auto body) {
    std::vector<blocks_t> got(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) ts.emplace_back([&, t] { body(t, got[t]); });
    for (auto& th : ts) th.join();
    blocks_t all;
    for (auto& g : got) all.insert(all.end(), g.begin(), g.end());
    return all;
  };
  const auto free_all = [&](const blocks_t& all) {
    on_threads([&](int t, blocks_t&) {
      for (std::size_t i = t; i < all.size(); i += threads)
        gpualloc::heap_free(H.get(), reinterpret_cast<void*>(all[i].first));
    });
  };
  for (int round = 0; round < 2; ++round) {
    blocks_t used = on_threads([&](int t, blocks_t& got) {
      std::vector<std::uint32_t> left(L.classes);
      for (std::uint32_t c = 0; c < L.classes; ++c)
        left[c] = c == fc ? 0 : (L.objects(c) * 6 / 10 * (L.cls[c].slot_mask + 1) + threads - 1) / threads;
      for (bool any = true; any;) {  // one object of each class in turn
        any = false;
        for (std::uint32_t c = 0; c < L.classes; ++c) {
          if (left[c] == 0) continue;
          --left[c];
          any = true;
          const std::uint64_t bytes = class_bytes(c) - (t % 2) * 8;  // round up into c too
          if (void* p = gpualloc::heap_malloc(H.get(), bytes))
            got.emplace_back(reinterpret_cast<std::uintptr_t>(p), bytes);
        }
      }
    });
    CHECK(!overlap(used, L, arena), "idle blocks: objects of many classes overlap (round %d)", round);
    free_all(used);
    const std::uint64_t pinned = held_by_slots(L, arena, fc, false) << L.segment_log2;
    const std::uint64_t in_next = (held_by_slots(L, arena, fc, true) << L.segment_log2) - pinned;
    CHECK(pinned >= (L.classes - 1ull) * L.segment_bytes(), "idle blocks: only %" PRIu64 " KiB in current blocks",
          pinned >> 10);
    blocks_t filled = on_threads([&](int, blocks_t& got) {
      while (void* p = gpualloc::heap_malloc(H.get(), size))
        got.emplace_back(reinterpret_cast<std::uintptr_t>(p), size);
    });
    CHECK(!overlap(filled, L, arena), "idle blocks: 8 KiB objects overlap (round %d)", round);
    const std::uint64_t handed = filled.size() * size;
    CHECK(handed + pinned / 4 >= usable,
          "idle blocks: the fill got %" PRIu64 " KiB of %" PRIu64 " KiB, %" PRIu64 " KiB in idle current blocks "
          "(round %d)", handed >> 10, usable >> 10, pinned >> 10, round);
    const std::uint64_t still = held_by_slots(L, arena, fc, false) << L.segment_log2;
    CHECK(still == 0, "idle blocks: other classes' slots still hold %" PRIu64 " KiB after the fill (round %d)",
          still >> 10, round);
    std::printf("idle blocks: %d threads on a %" PRIu64 " MiB heap, round %d: current blocks of %u classes held "
                "%" PRIu64 " KiB (%.1f%%), next blocks %" PRIu64 " KiB; then 8 KiB objects: %.1f%% of the arena "
                "(%" PRIu64 " of %" PRIu64 " KiB a span-aligned fill can get), %" PRIu64 " KiB left in slots\n",
                threads, heap_bytes >> 20, round, L.classes - 1, pinned >> 10, 100.0 * pinned / H.arena(),
                in_next >> 10, 100.0 * handed / H.arena(), handed >> 10, usable >> 10, still >> 10);
    free_all(filled);
    const gpualloc::detail::bit_tree tree(reinterpret_cast<std::uint64_t*>(arena + L.tree_offset), L.tree);
    std::uint64_t in_tree = 0;
    for (std::uint32_t i = tree.next(0); i != gpualloc::detail::bit_tree::none; i = tree.next(i + 1)) ++in_tree;
    const std::uint64_t slotted = held_by_slots(L, arena, L.classes, true);
    CHECK(in_tree + slotted == L.segments, "idle blocks: all freed, the tree has %" PRIu64 " segments and the slots "
          "%" PRIu64 " of %u (round %d)", in_tree, slotted, L.segments, round);
  }
}

// Threads hold `share` of a 16 MiB arena in blocks of 16 B .. `largest`
// (multiples of 16) and replace random ones until each was replaced twice
// on average: no 16-byte granule handed to two blocks at once, and with
// `must_serve` no NULL (blocks.h Q3 queues a class's retired blocks with
// any object free once it runs dry; while blocks were also queued from a
// quarter free, without Q3 16 B churn held 78-80 % of the arena, with it
// 95-98 %: --report).
void test_churn_near_full(double share, std::uint64_t largest, bool must_serve) {
  constexpr int threads = 8;
  utilisation::heap H(strategy_id::sm_slab, 16u << 20);
  const auto arena = reinterpret_cast<std::uintptr_t>(H.get());
  const std::uint64_t granules = (16u << 20) / 16;
  std::vector<std::atomic<std::uint8_t>> owner(granules);
  const std::uint64_t each = static_cast<std::uint64_t>(share * H.arena() / threads);
  std::atomic<std::uint64_t> nulls{0}, doubly{0}, replaced{0};
  auto own = [&](void* p, std::uint64_t n, std::uint8_t from, std::uint8_t to) {
    const std::uint64_t first = (reinterpret_cast<std::uintptr_t>(p) - arena) / 16;
    for (std::uint64_t g = first; g < first + n / 16; ++g)
      if (owner[g].exchange(to, std::memory_order_relaxed) != from) doubly.fetch_add(1, std::memory_order_relaxed);
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      utilisation::rng r(t + 1);
      const auto me = static_cast<std::uint8_t>(t + 1);
      auto size = [&] { return 16 * (1 + r.below(largest / 16)); };
      std::vector<std::pair<void*, std::uint64_t>> live;
      for (std::uint64_t held = 0; held < each;) {
        const std::uint64_t n = size();
        void* p = gpualloc::heap_malloc(H.get(), n);
        if (p == nullptr) {
          nulls.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        own(p, n, 0, me);
        live.emplace_back(p, n);
        held += n;
      }
      for (std::uint64_t i = 0; i < 2 * live.size(); ++i) {
        auto& victim = live[r.below(live.size())];
        if (victim.first != nullptr) {
          own(victim.first, victim.second, me, 0);
          gpualloc::heap_free(H.get(), victim.first);
        }
        victim.second = size();
        victim.first = gpualloc::heap_malloc(H.get(), victim.second);
        if (victim.first == nullptr) {
          nulls.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        own(victim.first, victim.second, 0, me);
        replaced.fetch_add(1, std::memory_order_relaxed);
      }
      for (auto& [p, n] : live)
        if (p != nullptr) {
          own(p, n, me, 0);
          gpualloc::heap_free(H.get(), p);
        }
    });
  for (auto& th : ts) th.join();
  CHECK(doubly.load() == 0, "churn near full: %" PRIu64 " granules handed to two blocks at once", doubly.load());
  CHECK(!must_serve || nulls.load() == 0, "churn near full (%.0f%% of the arena, 16 B .. %" PRIu64 " B): %" PRIu64 " NULL",
        100 * share, largest, nulls.load());
  std::printf("churn near full: %d threads hold %.0f%% of the arena in 16 B .. %" PRIu64 " B blocks, %" PRIu64
              " replaced, %" PRIu64 " NULL\n", threads, 100 * share, largest, replaced.load(), nulls.load());
}

// Threads claim aligned runs of 2^k (k = 0 .. 6) from SM-like starts and
// give them back (blocks.h get and release): aligned, one owner each.
void test_span_claims() {
  constexpr std::uint32_t universe = 1000, threads = 8, rounds = 20000;
  const gpualloc::detail::bit_tree_layout TL = gpualloc::detail::bit_tree_layout::make(universe);
  std::vector<std::uint64_t> words(TL.words);
  for (std::uint32_t w = 0; w < TL.words; ++w) words[w] = TL.initial_word(w, true);
  const gpualloc::detail::bit_tree tree(words.data(), TL);
  std::vector<std::atomic<std::uint32_t>> owner(universe);
  std::atomic<int> bad{0}, got{0};
  std::vector<std::thread> ts;
  for (std::uint32_t t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::vector<std::pair<std::uint32_t, std::uint32_t>> held;  // first, count
      for (std::uint32_t r = 0; r < rounds; ++r) {
        const std::uint32_t k = (t + r) % 7, n = 1u << k;
        const std::uint32_t first = tree.claim_aligned_from((t * 7 + r) % 16 * 64, k, t);
        if (first != gpualloc::detail::bit_tree::none) {
          got.fetch_add(1, std::memory_order_relaxed);
          if (first % n != 0 || first + n > universe) bad.fetch_add(1);
          for (std::uint32_t i = first; i < first + n && i < universe; ++i)
            if (owner[i].exchange(t + 1, std::memory_order_relaxed) != 0) bad.fetch_add(1);
          held.emplace_back(first, n);
        }
        if (held.size() > 6 || (first == gpualloc::detail::bit_tree::none && !held.empty())) {
          const auto [f, c] = held.front();
          held.erase(held.begin());
          for (std::uint32_t i = f; i < f + c; ++i)
            if (owner[i].exchange(0, std::memory_order_relaxed) != t + 1) bad.fetch_add(1);
          tree.insert_run(f, c);
        }
      }
      for (const auto [f, c] : held) {
        for (std::uint32_t i = f; i < f + c; ++i) owner[i].store(0, std::memory_order_relaxed);
        tree.insert_run(f, c);
      }
    });
  for (auto& th : ts) th.join();
  CHECK(bad.load() == 0, "spans: %d misaligned or doubly owned segments", bad.load());
  std::uint32_t in_set = 0;
  for (std::uint32_t i = tree.next(0); i != gpualloc::detail::bit_tree::none; i = tree.next(i + 1)) ++in_set;
  CHECK(in_set == universe, "spans: %u of %u segments back in the tree", in_set, universe);
  CHECK(tree.claim_aligned_from(0, 6, 5) == 0 && tree.claim_aligned_from(0, 6, 0) == 64 &&
            tree.claim_aligned_from(100, 0, 0) == 128 && tree.claim_aligned_from(130, 1, 2) == 134,
        "spans: a whole tree does not hand out the salt-th aligned run of the first word from the start");
  std::printf("spans: %u threads, %d of %u claims of aligned runs of 1 .. 64 segments got one, one owner each\n",
              threads, got.load(), threads * rounds);
}

void print_plan(std::uint64_t bytes, std::uint32_t sms) {
  const layout L = layout::make(bytes, sms);
  std::printf("%" PRIu64 " MiB heap on %u SMs: %u segments of %" PRIu64 " KiB, tables %.2f%% of the arena\n",
              bytes >> 20, sms, L.segments, L.segment_bytes() >> 10, 100.0 * L.data_offset / bytes);
  for (std::uint32_t c = 0; c < L.classes; ++c)
    std::printf("  %6" PRIu64 " B: span %2u, K %5u, %3u slots%s", class_bytes(c), 1u << L.cls[c].span_log2,
                L.objects(c), L.cls[c].slot_mask + 1, c % 4 == 3 ? "\n" : ";");
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  utilisation::options o;
  if (!o.parse(argc, argv)) return 2;
  if (o.churn_band_turnovers > 0) {
    utilisation::churn_band_report(strategy_id::sm_slab, o.churn_band_turnovers, o.promises);
    return 0;
  }
  test_classes();
  test_layouts();
  test_block_life(16u << 20, 48);
  test_block_life(std::uint64_t{256} << 20, 4096);
  test_retired_until_scavenged(16u << 20, 48);
  test_retired_until_scavenged(std::uint64_t{256} << 20, 4096);
  test_span_claims();
  test_wide_blocks(std::uint64_t{256} << 20, 4096);
  test_wide_blocks(64u << 20, 256);
  test_idle_blocks_return(16u << 20, 8);
  test_idle_blocks_return(64u << 20, 8);
  test_churn_near_full(0.90, 16, true);
  test_churn_near_full(0.80, 1024, false);
  if (o.report) {
    print_plan(std::uint64_t{16} << 30, 132);
    print_plan(std::uint64_t{64} << 20, 132);
    utilisation::report(strategy_id::sm_slab, o.turnovers);
  }
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
