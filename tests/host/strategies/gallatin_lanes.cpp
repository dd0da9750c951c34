// Gallatin under the warp shapes of tests/gpu/warps.cu, on emulated warps of
// CPU threads (lanes.h), plain and under TSan. At rest: every installed
// block counts exactly its untaken slices as missing (B2), every other
// segment is free.
//
// Usage: gpualloc-gallatin-lanes [--steps N] [--warps N]
#include "lanes.h"  // first: see there

#include "gpualloc/strategies/gallatin/gallatin.h"

namespace {

using namespace stress;

// Everything freed: each installed block counts exactly its untaken slices
// as not given back, and every other segment is free again.
void check_at_rest(test_heap& heap) {
  using namespace gpualloc::gallatin_parts;
  const layout& L = gpualloc::state_of<gpualloc::strategies::gallatin::state>(heap.get()).L;
  const std::byte* arena = heap.get()->space.begin;
  const auto* slots = reinterpret_cast<const std::uint64_t*>(arena + L.slots_offset);
  const auto* counters = reinterpret_cast<const block_counters*>(arena + L.counters_offset);
  const auto* kinds = reinterpret_cast<const std::uint32_t*>(arena + L.kinds_offset);
  std::vector<bool> installed(L.segments);
  for (std::uint32_t c = 0; c < classes; ++c)
    for (std::uint32_t i = L.cls[c].first_slot; i <= L.cls[c].first_slot + L.cls[c].slot_mask; ++i) {
      const auto ref = static_cast<std::uint32_t>(slots[i]);
      if (ref == slot_empty || ref == slot_busy) continue;
      const std::uint32_t block = ref - 1, n = 1u << L.cls[c].count_log2;
      installed[block >> L.entries_log2] = true;
      const std::uint32_t taken = counters[block].taken & count_mask;
      const std::uint32_t untaken = taken >= n ? 0 : n - taken;
      if (counters[block].remaining != untaken)
        FAIL("gallatin lanes: class %u block %u: %u slices not given back, %u never taken", c, block,
             counters[block].remaining, untaken);
    }
  std::uint32_t held = 0;
  for (std::uint32_t seg = 0; seg < L.segments; ++seg) held += kinds[seg] != kind_free && !installed[seg];
  if (held != 0) FAIL("gallatin lanes: %u segments neither free nor holding an installed block", held);
}

}  // namespace

int main(int argc, char** argv) {
  return lanes::lanes_main(argc, argv, strategy_id::gallatin, "gallatin", check_at_rest);
}
