// sm-slab under the warp shapes of tests/gpu/warps.cu, on emulated warps of
// CPU threads (lanes.h), plain and under TSan. The front end's same-size
// entry with lanes of two sizes, runs of classes side by side (80 B beside
// 16 B, 48 B, 112 B ...) and frees by other lanes and warps all meet sm-slab's
// group claims and combined frees.
//
// At rest (every block freed): each segment is free (kind free, nothing held,
// its bit in the tree) or a slot holds it: a current block counts exactly
// its untaken positions, a `next` block all K of its started pass (and the
// count of `next` blocks, sm_slab.h P4, is their number), and every object of either
// has its free bit set, but those a block's first pass has not handed out
// yet (blocks.h B1, B2; a queued or retired block whose
// last object came back was released, Q2). A span's tails are held with
// their head: they name it, hold nothing and are not in the tree.
//
// Usage: gpualloc-sm-slab-lanes [--steps N] [--warps N]
#include "lanes.h"  // first: see there

#include "gpualloc/strategies/sm_slab/sm_slab.h"

namespace {

using namespace stress;

void check_at_rest(test_heap& heap) {
  using namespace gpualloc::sm_slab_parts;
  const layout& L = gpualloc::state_of<gpualloc::strategies::sm_slab::state>(heap.get()).L;
  const std::byte* arena = heap.get()->space.begin;
  const auto* records = reinterpret_cast<const segment_record*>(arena + L.records_offset);
  const auto* bitmaps = reinterpret_cast<const std::uint64_t*>(arena + L.bitmaps_offset);
  const auto* pairs = reinterpret_cast<const slot_pair*>(arena + L.slots_offset);
  const auto* leaves =
      reinterpret_cast<const std::uint64_t*>(arena + L.tree_offset) + L.tree.first_word[L.tree.levels - 1];
  enum class held : std::uint8_t { no, current, next, tail };
  std::vector<held> by(L.segments, held::no);
  std::vector<std::uint64_t> word_of(L.segments);  // the slot word that holds a block
  std::vector<std::uint32_t> class_of_slot(L.slot_count);
  for (std::uint32_t c = 0; c < L.classes; ++c)
    for (std::uint32_t i = 0; i <= L.cls[c].slot_mask; ++i) class_of_slot[L.cls[c].first_slot + i] = c;
  int reported = 0;
  const auto bad = [&](const char* what, std::uint32_t seg) {  // the first few
    if (reported++ < 5) FAIL("sm-slab lanes at rest: segment %u: %s", seg, what);
  };
  for (std::uint64_t i = 0; i < L.slot_count; ++i) {
    if (slot_word::current_install(pairs[i].next) != slot_word::install(pairs[i].current))
      bad("a slot's `next` does not carry current's install (sm_slab.h P1)", 0);
    for (const held which : {held::current, held::next}) {
      const std::uint64_t w = which == held::current ? pairs[i].current : pairs[i].next;
      const std::uint32_t seg = slot_word::segment(w);
      if (slot_word::is_busy(w)) bad("a slot's `next` is busy at rest", 0);
      if (seg == no_segment) continue;
      if (seg >= L.segments) {
        bad("a slot word names a segment past the heap", seg);
        continue;
      }
      if (by[seg] != held::no) bad("held by two slot words", seg);
      by[seg] = which;
      word_of[seg] = w;
      if (records[seg].kind != class_of_slot[i]) bad("held by a slot of another class", seg);
    }
  }
  std::int64_t next_blocks = 0;
  for (const held h : by) next_blocks += h == held::next;
  const auto* counted = reinterpret_cast<const gpualloc::detail::fill_count*>(arena + L.next_blocks_offset);
  if (counted->value != next_blocks)
    FAIL("sm-slab lanes at rest: %lld blocks in `next` words, counted %lld (sm_slab.h P4)",
         static_cast<long long>(next_blocks), static_cast<long long>(counted->value));
  for (std::uint32_t seg = 0; seg < L.segments; ++seg) {
    if ((by[seg] != held::current && by[seg] != held::next) || records[seg].kind >= L.classes) continue;
    const std::uint32_t span = 1u << (L.cls[records[seg].kind].span_log2 + records[seg].wide);
    for (std::uint32_t d = 1; d < span; ++d) {
      if (seg + d >= L.segments || by[seg + d] != held::no) {
        bad("a span's tail past the heap or held twice", seg + d);
        break;
      }
      by[seg + d] = held::tail;
      if (records[seg + d].kind != tail_kind(records[seg].kind, d)) bad("a span's tail does not name its head", seg + d);
    }
  }
  for (std::uint32_t seg = 0; seg < L.segments; ++seg) {
    const segment_record& r = records[seg];
    const bool in_tree = (leaves[seg / 64] >> (seg % 64)) & 1;
    const std::uint64_t state = r.holds & flags_and_count;
    if (by[seg] == held::no) {
      if (r.kind != kind_free) bad("neither free nor held by a slot", seg);
      if (state != 0) bad("free, but its count or flags are not 0", seg);
      if (!in_tree) bad("free, but not in the tree", seg);
      continue;
    }
    if (in_tree) bad("held by a slot and in the tree", seg);
    if (by[seg] == held::tail) {
      if (state != 0) bad("a span's tail holds something", seg);
      continue;
    }
    const std::uint32_t c = r.kind, K = L.objects(c, r.wide);
    if (r.wide != slot_word::wide(word_of[seg])) bad("its slot word and its record tell different widths", seg);
    const std::uint64_t taken = by[seg] == held::current ? slot_word::taken(word_of[seg]) : 0;
    const std::uint64_t untaken = taken < K ? K - taken : 0;  // a `next` block's pass has started (sm_slab.h P3)
    if (state != (in_slot | untaken)) {
      char what[160];
      std::snprintf(what, sizeof what,
                    "holds %#" PRIx64 ", not in_slot + %" PRIu64 " untaken positions (class %u, %" PRIu64
                    " of %u taken)",
                    state, untaken, c, taken, K);
      bad(what, seg);
    }
    // A fresh block's pass owns the objects it has not handed out: their bits stay clear (B1).
    const bool fresh = slot_word::fresh(word_of[seg]);
    for (std::uint32_t i = 0; i < K; ++i) {
      const bool set = (bitmaps[(std::uint64_t{seg} << L.bitmap_words_log2) + i / 64] >> (i % 64)) & 1;
      const bool owned_by_pass = fresh && i >= taken;
      if (set == owned_by_pass) {
        bad(set ? "a free bit is set for an object a first pass has not handed out" : "an object's free bit is clear",
            seg);
        break;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return lanes::lanes_main(argc, argv, strategy_id::sm_slab, "sm-slab", check_at_rest);
}
