// Host tests of the building blocks Ouroboros added to detail/, and of its
// layouts; with --report, its utilisation and stranding figures.
//
//  semaphore   threads wait on one bulk semaphore (detail/bulk_semaphore.h)
//              for 1-4 resources, fetch bulks of 8 from a finite supply when
//              it tells them to, hold and signal them back: no grant beyond
//              what was fetched, every wait returns, and with a supply too
//              small for them waits return fewer (never hang)
//  index slots threads enqueue and dequeue through a ring of slots
//              (detail/index_queue.h) gated by a fill count: every index
//              comes out exactly once
//  bit field   threads claim pages from one bit-field (detail/bit_field.h)
//              after reserving them from a count, and set them back: no page
//              held twice, all pages free at the end
//  list queues two shallow linked queues (storage.h list_queue, VL) sharing
//              the chunk pool, driven as the C protocol drives them (a few
//              dozen entries, every take put back at once): no entry lost or
//              held twice, the back always names a live queue chunk of its
//              ordinal and the oldest chunk never passes it (Q2), and the
//              queues keep moving (a stuck put is reported, not waited for)
//  list queue placement  a deep linked queue (P-VL's entries): 34 threads
//              each reserve a chunk's worth of back positions and, released
//              together, put them, so the puts at 34 chunks' first positions
//              make and link chunks at once (storage.h: VL placement);
//              then they take them all: every entry comes out once, and no
//              round gets stuck (a stuck put is reported, not waited for);
//              again with every 16th put and take filling its walk hint
//              with a lie (a random chunk named as one just ahead of the
//              list's pointer): walks that start there must notice (Q3)
//  chunk hints the C variants' per-SM chunk hints (chunk_queues.h, C6):
//              threads allocate 16 B-4 KiB, mark every 16-byte granule of a
//              block as theirs, free at random; every 8th request first
//              fills its SM's hint for a random size with a lie (a random
//              chunk under its current tag, or a random tag): no granule is
//              handed out twice, and once everything is freed one thread
//              gets 90 % of the arena again in 8 KiB blocks (a run stuck
//              for 300 s is reported and ends the program)
//  array queue threads take batches of 1-32 entries from an array queue
//              (storage.h array_queue, VA) and put them back, so its chunks
//              fill, drain and are recycled by their counts of takes: no
//              entry lost or held twice, and the queue holds only the chunks
//              its entries need (a missed count would strand a chunk)
//  array queue groups  the same through take_for_group, with two emulated
//              warps (detail/host_warp.h) whose groups of random lanes take
//              1 .. size entries (lanes ranked past the count take none) and
//              put them back: counted by groups, across chunk boundaries
//  layout      plans of the six variants for arenas of 1 KiB .. 80 GiB: the
//              tables in order inside the arena, the chunks after them
//  sizes       every request size of 16 B .. 8 KiB gets a page that holds it,
//              at most twice its size (at most 1.5 times above 256 B), and
//              the pages of a size fill their chunk
//  report      (--report) per variant, on a 64 MiB heap: the share handed
//              out in 16 B blocks until the first NULL, and stranding: all
//              of one size until NULL, free everything, then another size
//
// Usage: gpualloc-ouroboros-parts [--report]
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string_view>
#include <thread>
#include <vector>

#include "gpualloc/allocate.h"
#include "gpualloc/detail/bit_field.h"
#include "gpualloc/detail/bulk_semaphore.h"
#include "gpualloc/detail/host_warp.h"
#include "gpualloc/detail/index_queue.h"
#include "gpualloc/dispatch.h"
#include "utilisation.h"

namespace {

std::atomic<int> failures{0};

#define FAIL(...)                      \
  do {                                 \
    std::fprintf(stderr, "FAILED: ");  \
    std::fprintf(stderr, __VA_ARGS__); \
    std::fprintf(stderr, "\n");        \
    failures.fetch_add(1);             \
  } while (0)

constexpr int threads = 8;

// Strategy S's own view of a heap laid out as libgpualloc does it (utilisation.h).
template <class S>
gpualloc::strategies::ouro::heap view_of(const utilisation::heap& H) {
  return {gpualloc::state_of<typename S::state>(H.get()).L, H.get()->space.begin};
}

// `supply`: the bulks the "pool" can give (when the threads want more, waits come back short).
void test_semaphore(std::int64_t supply) {
  constexpr std::uint32_t per_bulk = 8;
  gpualloc::detail::bulk_semaphore sem{};
  std::atomic<std::int64_t> bulks_left{supply}, fetched{0}, in_use{0};
  std::atomic<std::uint64_t> short_grants{0};
  auto refill = [&](std::uint64_t k) {
    std::uint64_t got = 0;
    for (; got < k; ++got) {
      if (bulks_left.fetch_sub(1) <= 0) {
        bulks_left.fetch_add(1);
        break;
      }
      fetched.fetch_add(per_bulk);  // before the resources become grantable
      sem.signal_expected(per_bulk);
    }
    return got;
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::mt19937 r(t);
      std::vector<std::uint32_t> held;
      for (int i = 0; i < 20000; ++i) {
        const std::uint32_t n = 1 + r() % 4;
        const std::uint32_t got = sem.try_wait(n) ? n : sem.wait(n, per_bulk, refill);
        if (got < n) short_grants.fetch_add(1);
        if (got > 0) {
          if (in_use.fetch_add(got) + got > fetched.load())
            FAIL("semaphore: %lld resources in use, only %lld fetched", (long long)(in_use.load()),
                 (long long)fetched.load());
          held.push_back(got);
        }
        if (held.size() > 40 || (r() % 3 == 0 && !held.empty())) {  // give some back
          in_use.fetch_sub(held.back());
          sem.signal(held.back());
          held.pop_back();
        }
      }
      for (std::uint32_t got : held) {
        in_use.fetch_sub(got);
        sem.signal(got);
      }
    });
  for (auto& t : ts) t.join();
  const std::int64_t left = sem.available();
  if (left != fetched.load())
    FAIL("semaphore: %lld available at the end, %lld fetched", (long long)left, (long long)fetched.load());
  std::printf("  semaphore: %d threads x 20000 waits, %lld bulks of %u fetched (supply %lld), %" PRIu64
              " short grants\n",
              threads, (long long)fetched.load() / per_bulk, per_bulk, (long long)supply, short_grants.load());
}

void test_index_slots() {
  using slot = gpualloc::detail::index_slot<std::uint32_t>;
  constexpr std::uint64_t capacity = 256, per_thread = 50000;
  std::vector<std::uint32_t> slots(capacity);
  for (auto& s : slots) slot::clear(s);
  const gpualloc::detail::index_ring<std::uint32_t> ring{slots.data(), capacity - 1};
  gpualloc::detail::queue_ends ends{};
  gpualloc::detail::fill_count fill{};
  std::atomic<std::int64_t> room{static_cast<std::int64_t>(capacity)};  // the producers' own gate: never overfill
  std::vector<std::atomic<std::uint8_t>> seen(threads / 2 * per_thread);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      if (t % 2 == 0) {  // producer
        for (std::uint64_t i = 0; i < per_thread; ++i) {
          while (room.fetch_sub(1) <= 0) {
            room.fetch_add(1);
            std::this_thread::yield();
          }
          fill.add(1);
          slot::put(ring.at(ends.reserve_back(1)), static_cast<std::uint32_t>(t / 2 * per_thread + i));
        }
      } else {  // consumer
        for (std::uint64_t i = 0; i < per_thread; ++i) {
          while (!fill.try_take(1)) std::this_thread::yield();
          const std::uint32_t v = slot::take(ring.at(ends.reserve_front(1)));
          room.fetch_add(1);
          if (v >= seen.size() || seen[v].fetch_add(1) != 0) FAIL("index slots: index %u taken twice or invented", v);
        }
      }
    });
  for (auto& t : ts) t.join();
  for (std::size_t v = 0; v < seen.size(); ++v)
    if (seen[v].load() != 1) {
      FAIL("index slots: index %zu came out %u times", v, (unsigned)seen[v].load());
      break;
    }
  std::printf("  index slots: %d producers and %d consumers, %zu indices through a ring of %" PRIu64 "\n", threads / 2,
              threads / 2, seen.size(), capacity);
}

void test_bit_field() {
  constexpr std::uint32_t pages = 512, words = pages / 64;
  std::uint64_t bits[words];
  for (auto& w : bits) w = ~std::uint64_t{0};
  const gpualloc::detail::bit_field field{bits};
  std::atomic<std::int64_t> count{pages};
  std::vector<std::atomic<std::uint8_t>> held(pages);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::mt19937 r(t);
      std::vector<std::uint32_t> mine;
      for (int i = 0; i < 20000; ++i) {
        const std::uint32_t want = 1 + r() % 40;
        if (count.fetch_sub(want) >= want) {  // reserved: the bits are there to find
          std::uint32_t left = want;
          for (std::uint32_t w = r() % words; left != 0; w = (w + 1) % words) {
            std::uint64_t m = field.claim(w, left);
            left -= gpualloc::detail::popcount(m);
            for (; m != 0; m &= m - 1) {
              const std::uint32_t page = w * 64 + gpualloc::detail::lowest_bit(m);
              if (held[page].exchange(1) != 0) FAIL("bit field: page %u claimed twice", page);
              mine.push_back(page);
            }
          }
        } else {
          count.fetch_add(want);
        }
        while (mine.size() > 20 || (!mine.empty() && r() % 2)) {
          held[mine.back()].store(0);
          field.set(mine.back());
          mine.pop_back();
          count.fetch_add(1);
        }
      }
      for (std::uint32_t page : mine) {
        held[page].store(0);
        field.set(page);
        count.fetch_add(1);
      }
    });
  for (auto& t : ts) t.join();
  for (std::uint64_t w : bits)
    if (w != ~std::uint64_t{0}) FAIL("bit field: a page is missing at the end");
  if (gpualloc::detail::nth_set_bit(0x8000000100000001ull, 2) != 63 ||
      gpualloc::detail::nth_set_bit(0xffull, 5) != 5 || gpualloc::detail::nth_set_bit(~0ull, 63) != 63 ||
      gpualloc::detail::nth_set_bit(0x1eull, 0) != 1 || gpualloc::detail::lowest_set_bits(0xf0f0, 5) != 0x10f0)
    FAIL("bit field: nth_set_bit / lowest_set_bits");
  std::printf("  bit field: %d threads x 20000 claims of 1-40 pages from %u\n", threads, pages);
}

template <class S>
void check_layout(const char* name, std::uint64_t arena_bytes) {
  namespace ouro = gpualloc::strategies::ouro;
  typename S::state s{};
  S::plan(s, gpualloc::arena{nullptr, arena_bytes}, gpualloc::device_facts{});
  const ouro::layout& L = s.L;
  if (L.chunks == 0) return;  // serves nothing, touches nothing
  const std::uint64_t tables[] = {L.controls, L.tree, L.desc, L.content, L.storage, L.large};
  for (std::size_t i = 1; i < std::size(tables); ++i)
    if (tables[i] < tables[i - 1]) FAIL("layout %s, %" PRIu64 " B: tables out of order", name, arena_bytes);
  for (unsigned c = 0; c < ouro::page_classes; ++c)
    if (L.ring[c] < L.large || L.ring[c] > L.chunk_base)
      FAIL("layout %s, %" PRIu64 " B: ring %u misplaced", name, arena_bytes, c);
  if (L.chunk_base % 4096 != 0 || L.chunk_base + std::uint64_t{L.chunks} * ouro::chunk_bytes > arena_bytes)
    FAIL("layout %s, %" PRIu64 " B: chunks outside the arena", name, arena_bytes);
  if (L.chunks > ouro::max_chunks) FAIL("layout %s: %u chunks", name, L.chunks);
}

// Q2 of storage.h, under the access pattern that broke it on the GPU
// (ouroboros-c-vl: the back moved along a recycled chunk's link).
void test_list_queues() {
  namespace ouro = gpualloc::strategies::ouro;
  using gpualloc::strategies::ouroboros_c_vl;
  using entry = std::uint64_t;
  using list = ouro::list_queue;
  constexpr unsigned queues = 2, first_queue = 1, entries = 16, per_queue = threads / 2;
  const utilisation::heap H(gpualloc::strategy_id::ouroboros_c_vl, 64ull << 20, gpualloc::device_facts{}.sm_count);
  const ouro::heap h = view_of<ouroboros_c_vl>(H);
  std::vector<std::atomic<int>> owner(queues * entries);
  for (unsigned q = 0; q < queues; ++q) {
    ouro::queue_control& qc = h.queue(first_queue + q);
    if (!list::reserve_slots<entry>(h, first_queue + q, 2 * entries)) FAIL("list queues: no reservation");
    for (entry e = 0; e < entries; ++e) {
      qc.fill.add(1);
      list::put<entry>(h, first_queue + q, qc.ends.reserve_back(1), e);
    }
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> moves{0};
  std::atomic<int> lost{0}, twice{0}, stale_back{0}, old_past_back{0};
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < queues * per_queue; ++t)
    ts.emplace_back([&, q = t / per_queue] {
      ouro::queue_control& qc = h.queue(first_queue + q);
      while (!stop.load(std::memory_order_relaxed)) {
        if (!qc.fill.try_take(1)) continue;
        const entry e = list::take<entry>(h, first_queue + q, qc.ends.reserve_front(1));
        if (e >= entries) {
          lost.fetch_add(1);
          continue;
        }
        if (owner[q * entries + e].exchange(1) != 0) twice.fetch_add(1);
        owner[q * entries + e].store(0);
        qc.fill.add(1);
        list::put<entry>(h, first_queue + q, qc.ends.reserve_back(1), e);
        moves.fetch_add(1, std::memory_order_relaxed);
      }
    });
  std::thread monitor([&] {  // the back of queue 1, whenever two reads of it agree
    using gpualloc::detail::device_atomic;
    ouro::queue_control& qc = h.queue(first_queue);
    while (!stop.load(std::memory_order_relaxed)) {
      const std::uint64_t back = device_atomic<std::uint64_t>(qc.list_back).load(gpualloc::detail::acquire);
      const std::uint64_t old = device_atomic<std::uint64_t>(qc.list_old).load(gpualloc::detail::acquire);
      const std::uint64_t d = h.load_desc(static_cast<std::uint32_t>(back));
      if (device_atomic<std::uint64_t>(qc.list_back).load(gpualloc::detail::acquire) != back) continue;
      if (static_cast<std::int32_t>(static_cast<std::uint32_t>(back >> 32) - static_cast<std::uint32_t>(old >> 32)) < 0)
        old_past_back.fetch_add(1);
      if (ouro::descriptor::kind(d) != ouro::descriptor::queue || ouro::descriptor::payload(d) != (back >> 32))
        stale_back.fetch_add(1);
    }
  });
  std::uint64_t last = 0;
  for (int tick = 0; tick < 20; ++tick) {  // 2 s
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::uint64_t now = moves.load();
    if (now == last && tick > 0) {
      FAIL("list queues: stuck after %" PRIu64 " moves (a put waits on a chunk that is gone)", now);
      std::fflush(stdout);
      std::_Exit(1);  // the stuck threads never return
    }
    last = now;
  }
  stop = true;
  for (auto& t : ts) t.join();
  monitor.join();
  if (lost || twice) FAIL("list queues: %d entries out of range, %d held twice", lost.load(), twice.load());
  if (stale_back || old_past_back)
    FAIL("list queues: the back named a recycled chunk %d times, the oldest chunk passed it %d times (Q2)",
         stale_back.load(), old_past_back.load());
  std::printf("  list queues: %u shallow queues, %" PRIu64 " takes and puts\n", queues, moves.load());
}

// Overwrites this thread's walk hint for one end (0: back, 1: front) of
// queue `queue` (storage.h list_queue) with a lie: a random chunk, named as
// one of the `ahead` ordinals past where the list pointer of that end
// stands (those the walks look for), so its next walk starts there, follows
// whatever links that chunk has and must notice (Q3).
void lie_in_hint(const gpualloc::strategies::ouro::heap& h, unsigned queue, unsigned end, unsigned ahead,
                 std::mt19937_64& rng) {
  namespace ouro = gpualloc::strategies::ouro;
  using gpualloc::detail::device_atomic;
  using list = ouro::list_queue;
  ouro::queue_control& qc = h.queue(queue);
  std::uint64_t& pointer = end == 0 ? qc.list_back : qc.list_front;
  const std::uint64_t at = device_atomic<std::uint64_t>(pointer).load(gpualloc::detail::relaxed);
  const std::uint64_t ordinal = (at >> 32) + 1 + rng() % ahead;
  const std::uint64_t chunk = rng() % (h.L.chunks + 2);  // now and then past the last chunk
  const std::uint64_t slot =
      list::made_slots + end * list::hints_per_end + (gpualloc::detail::sm_id() & (list::hints_per_end - 1));
  device_atomic<std::uint64_t>(h.at<std::uint64_t>(h.L.ring[queue])[slot])
      .store((ordinal & 0xffffffffu) << 32 | chunk, gpualloc::detail::relaxed);
}

// lying_hints: every 16th put or take first fills its thread's walk hint with a lie.
void test_list_queue_placement(bool lying_hints) {
  namespace ouro = gpualloc::strategies::ouro;
  using gpualloc::strategies::ouroboros_p_vl;
  using entry = std::uint32_t;
  using list = ouro::list_queue;
  constexpr unsigned queue = 0, putters = 34, rounds = 30;
  constexpr std::uint64_t per_putter = ouro::spots<entry>;
  const char* test = lying_hints ? "list queue placement, lying hints" : "list queue placement";
  const utilisation::heap H(gpualloc::strategy_id::ouroboros_p_vl, 64ull << 20, gpualloc::device_facts{}.sm_count);
  const ouro::heap h = view_of<ouroboros_p_vl>(H);
  ouro::queue_control& qc = h.queue(queue);
  if (!list::reserve_slots<entry>(h, queue, putters * per_putter)) FAIL("%s: no reservation", test);
  std::vector<std::atomic<int>> seen(putters * per_putter);
  std::atomic<std::uint64_t> done{0};
  std::atomic<int> wrong{0};
  std::barrier sync(putters);
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < putters; ++t)
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (unsigned r = 0; r < rounds; ++r) {
        const std::uint64_t first = qc.ends.reserve_back(per_putter);
        sync.arrive_and_wait();  // every first position is reserved: the puts start together
        for (std::uint64_t i = 0; i < per_putter; ++i) {
          if (lying_hints && i % 16 == 0) lie_in_hint(h, queue, 0, putters, rng);
          list::put<entry>(h, queue, first + i, static_cast<entry>(t * per_putter + i));
        }
        sync.arrive_and_wait();
        const std::uint64_t from = qc.ends.reserve_front(per_putter);
        for (std::uint64_t i = 0; i < per_putter; ++i) {
          if (lying_hints && i % 16 == 0) lie_in_hint(h, queue, 1, putters, rng);
          const entry e = list::take<entry>(h, queue, from + i);
          if (e >= seen.size() || seen[e].fetch_add(1) != static_cast<int>(r)) wrong.fetch_add(1);
        }
        done.fetch_add(1);
        sync.arrive_and_wait();
      }
    });
  // A round takes about 0.2 s under ThreadSanitizer here; 10 s without
  // progress is a hang, not a slow machine.
  std::uint64_t last = 0;
  auto moved = std::chrono::steady_clock::now();
  while (done.load() < putters * rounds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::uint64_t now = done.load();
    if (now != last) moved = std::chrono::steady_clock::now();
    if (now == last && std::chrono::steady_clock::now() - moved > std::chrono::seconds(10)) {
      FAIL("%s: stuck after %" PRIu64 " of %u rounds' puts (a placement waits forever)", test, now / putters,
           rounds);
      std::fflush(stdout);
      std::_Exit(1);  // the stuck threads never return
    }
    last = now;
  }
  for (auto& t : ts) t.join();
  if (wrong) FAIL("%s: %d entries lost, out of range or taken twice", test, wrong.load());
  std::printf("  %s: %u putters x %u rounds of %" PRIu64 " entries\n", test, putters, rounds, per_putter);
}

// An array queue (storage.h, VA) of its own 64 MiB P-VA heap, holding the
// entries 0 .. 2999 (a chunk and a half of slots).
struct filled_array_queue {
  using entry = std::uint32_t;
  using array = gpualloc::strategies::ouro::array_queue;
  static constexpr unsigned queue = 0;
  static constexpr entry entries = 3000;

  utilisation::heap H{gpualloc::strategy_id::ouroboros_p_va, 64ull << 20, gpualloc::device_facts{}.sm_count};
  gpualloc::strategies::ouro::heap h = view_of<gpualloc::strategies::ouroboros_p_va>(H);
  gpualloc::strategies::ouro::queue_control& q = h.queue(queue);

  explicit filled_array_queue(const char* test) {
    if (!array::reserve_slots<entry>(h, queue, entries)) FAIL("%s: no reservation", test);
    for (entry e = 0; e < entries; ++e) {
      q.fill.add(1);
      array::put<entry>(h, queue, q.ends.reserve_back(1), e);
    }
  }

  entry take(std::uint64_t pos) const { return array::take<entry>(h, queue, pos); }
  entry take_for_group(std::uint64_t first, std::uint32_t n, const gpualloc::detail::lane_group& g) const {
    return array::take_for_group<entry>(h, queue, first, n, g);
  }
  void put(std::uint64_t pos, entry e) const { array::put<entry>(h, queue, pos, e); }

  // Queue chunks in the heap: the live positions [front, back) span at
  // most 3 chunks, and one more is placed in advance.
  unsigned queue_chunks() const {
    namespace ouro = gpualloc::strategies::ouro;
    unsigned n = 0;
    for (std::uint32_t x = 0; x < h.L.chunks; ++x) n += ouro::descriptor::kind(h.load_desc(x)) == ouro::descriptor::queue;
    return n;
  }
  static constexpr unsigned most_queue_chunks = 4;
};

// Fills this thread's hint for size c with a lie: a random chunk under its
// current tag (a hint to a chunk of another size, a free one, or a true
// one), or under a random tag. The slot formula repeats chunk_queues.h's
// (sm_chunks, sm_chunk: private).
template <class S>
void lie_in_chunk_hint(const gpualloc::strategies::ouro::heap& h, unsigned c, std::mt19937& rng) {
  using cq = typename S::content;
  const std::uint64_t hints = gpualloc::strategies::ouro::align_up(h.L.content + cq::per_chunk_bytes * h.L.chunks, 128);
  std::uint64_t& slot =
      h.at<std::uint64_t>(hints)[(gpualloc::detail::sm_id() % cq::sm_slots) * cq::entries_per_sm + c];
  const std::uint32_t x = rng() % h.L.chunks;
  using gpualloc::detail::device_atomic, gpualloc::detail::relaxed;
  const std::uint64_t state = device_atomic<std::uint64_t>(h.at<std::uint64_t>(h.L.content)[x]).load(relaxed);
  const std::uint64_t tag = rng() % 2 ? (state >> 8 & 0xffffff) : rng() % 0x1000000;
  device_atomic<std::uint64_t>(slot).store(tag << 32 | x, relaxed);
}

template <class S>
void test_chunk_hints(gpualloc::strategy_id id, const char* name) {
  namespace ouro = gpualloc::strategies::ouro;
  const utilisation::heap H(id, 16ull << 20);
  const ouro::heap h = view_of<S>(H);
  const std::byte* base = h.chunk(0);
  std::vector<std::atomic<int>> owner(std::uint64_t{h.L.chunks} * ouro::chunk_bytes / 16);
  std::atomic<int> twice{0}, corrupt{0};
  std::atomic<bool> done{false};
  std::thread watchdog([&] {  // a claim that trusted a lie may wait forever for its pages
    for (int tenths = 0; tenths < 3000 && !done.load(); ++tenths)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (done.load()) return;
    std::fprintf(stderr, "FAILED: chunk hints (%s): stuck for 300 s\n", name);
    std::_Exit(1);
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::vector<std::pair<std::byte*, std::uint64_t>> held;
      auto release = [&](std::size_t i) {
        auto [p, bytes] = held[i];
        const std::uint64_t first = static_cast<std::uint64_t>(p - base) / 16;
        for (std::uint64_t g = first; g < first + bytes / 16; ++g)
          if (owner[g].exchange(0, std::memory_order_relaxed) != t + 1) corrupt.fetch_add(1);
        gpualloc::heap_free(H.get(), p);
        held[i] = held.back();
        held.pop_back();
      };
      for (int i = 0; i < 4000; ++i) {
        const std::uint64_t bytes = std::uint64_t{16} << rng() % 9;
        if (i % 8 == 0) lie_in_chunk_hint<S>(h, ouro::class_of(bytes), rng);
        auto* p = static_cast<std::byte*>(gpualloc::heap_malloc(H.get(), bytes));
        if (p != nullptr) {
          const std::uint64_t first = static_cast<std::uint64_t>(p - base) / 16;
          for (std::uint64_t g = first; g < first + bytes / 16; ++g) {
            int free_granule = 0;
            if (!owner[g].compare_exchange_strong(free_granule, t + 1, std::memory_order_relaxed)) twice.fetch_add(1);
          }
          held.emplace_back(p, bytes);
        }
        if (held.size() > 48 || (!held.empty() && rng() % 2)) release(rng() % held.size());
      }
      while (!held.empty()) release(held.size() - 1);
    });
  for (auto& t : ts) t.join();
  done.store(true);
  watchdog.join();
  std::uint64_t again = 0;
  while (gpualloc::heap_malloc(H.get(), ouro::chunk_bytes) != nullptr) ++again;
  const double share = 100.0 * again * ouro::chunk_bytes / H.arena();
  if (twice.load() != 0 || corrupt.load() != 0)
    FAIL("chunk hints (%s): %d granules handed out twice, %d found taken by another owner", name, twice.load(),
         corrupt.load());
  if (share < 90)
    FAIL("chunk hints (%s): after everything was freed, 8 KiB blocks fill %.1f%% of the arena", name, share);
  std::printf("  chunk hints, lying (%s): 8 threads x 4,000 requests; then 8 KiB blocks fill %.1f%%\n", name, share);
}

// storage.h's array queue: takes counted on their chunks, chunks recycled
// once all of their takes are counted.
void test_array_queue() {
  namespace ouro = gpualloc::strategies::ouro;
  filled_array_queue Q("array queue");
  using entry = filled_array_queue::entry;
  ouro::queue_control& q = Q.q;
  constexpr std::uint64_t takes_per_thread = 200000;
  std::vector<std::atomic<int>> owner(Q.entries);
  std::atomic<int> lost{0}, twice{0}, running{threads};
  std::atomic<std::uint64_t> moves{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<entry> held;
      for (std::uint64_t done = 0; done < takes_per_thread;) {
        const auto n = static_cast<std::int64_t>(1 + rng() % 32);
        if (!q.fill.try_take(n)) continue;
        const std::uint64_t first = q.ends.reserve_front(static_cast<std::uint64_t>(n));
        for (std::int64_t i = 0; i < n; ++i) {  // as a group's lanes, in rank order
          const entry e = Q.take(first + static_cast<std::uint64_t>(i));
          if (e >= Q.entries) {
            lost.fetch_add(1);
            continue;
          }
          if (owner[e].exchange(1) != 0) twice.fetch_add(1);
          held.push_back(e);
        }
        const std::uint64_t back = q.ends.reserve_back(held.size());
        for (std::size_t i = 0; i < held.size(); ++i) {
          owner[held[i]].store(0);
          Q.put(back + i, held[i]);
        }
        q.fill.add(static_cast<std::int64_t>(held.size()));
        done += held.size();
        moves.fetch_add(held.size(), std::memory_order_relaxed);
        held.clear();
      }
      running.fetch_sub(1);
    });
  for (std::uint64_t last = ~std::uint64_t{0}; running.load() != 0;) {  // a take that waits forever is reported
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::uint64_t now = moves.load();
    if (now == last) {
      FAIL("array queue: stuck after %" PRIu64 " takes (a take waits forever)", now);
      std::fflush(stdout);
      std::_Exit(1);  // the stuck threads never return
    }
    last = now;
  }
  for (auto& t : ts) t.join();
  if (lost || twice) FAIL("array queue: %d entries out of range, %d held twice", lost.load(), twice.load());
  const unsigned queue_chunks = Q.queue_chunks();
  const std::uint64_t cycles = q.ends.front / ouro::spots<entry>;
  if (queue_chunks > Q.most_queue_chunks)
    FAIL("array queue: %u queue chunks after %" PRIu64 " chunks' worth of takes", queue_chunks, cycles);
  std::printf("  array queue: %d threads, %" PRIu64 " chunks' worth of takes, %u queue chunks left\n", threads, cycles,
              queue_chunks);
}

// The array queue through take_for_group, as page_queues::malloc calls it.
void test_array_queue_groups() {
  namespace ouro = gpualloc::strategies::ouro;
  using gpualloc::detail::host_warp;
  using gpualloc::detail::lane_group;
  filled_array_queue Q("array queue groups");
  using entry = filled_array_queue::entry;
  ouro::queue_control& q = Q.q;
  constexpr unsigned warps = 2, lanes = 32, steps = 3000;
  std::vector<std::atomic<int>> owner(Q.entries);
  std::atomic<int> lost{0}, twice{0};
  std::atomic<std::uint64_t> moves{0};
  std::vector<std::unique_ptr<host_warp>> warp;
  std::vector<std::unique_ptr<std::barrier<>>> step_done;
  for (unsigned w = 0; w < warps; ++w) {
    warp.push_back(std::make_unique<host_warp>(lanes));
    step_done.push_back(std::make_unique<std::barrier<>>(lanes));
  }
  std::vector<std::thread> ts;
  for (unsigned w = 0; w < warps; ++w)
    for (unsigned l = 0; l < lanes; ++l)
      ts.emplace_back([&, w, l] {
        const host_warp::lane me(*warp[w], l);
        std::mt19937 rng(w);  // every lane of a warp draws the same masks and counts
        for (unsigned step = 0; step < steps; ++step, step_done[w]->arrive_and_wait()) {
          unsigned mask = static_cast<unsigned>(rng()) | 1u;
          if (step % 4 == 0) mask = ~0u;  // full warps too, whose groups align with the chunks' ends less often
          const std::uint32_t want = 1 + static_cast<std::uint32_t>(rng() % lanes);
          if (!(mask >> l & 1u)) continue;
          const host_warp::active together(mask);
          const lane_group g = lane_group::coalesced();
          const std::uint32_t n = want < g.size() ? want : g.size();
          std::uint64_t first = ~std::uint64_t{0};
          if (g.is_leader() && q.fill.try_take(n)) first = q.ends.reserve_front(n);
          first = g.broadcast(first);
          if (first == ~std::uint64_t{0}) continue;
          const entry e = Q.take_for_group(first, n, g);
          const bool mine = g.rank() < n;
          if (mine && e >= Q.entries) lost.fetch_add(1);
          if (mine && e < Q.entries && owner[e].exchange(1) != 0) twice.fetch_add(1);
          std::uint64_t back = 0;
          if (g.is_leader()) back = q.ends.reserve_back(n);
          back = g.broadcast(back);
          if (mine && e < Q.entries) {
            owner[e].store(0);
            Q.put(back + g.rank(), e);
          }
          g.sync();
          if (g.is_leader()) {
            q.fill.add(n);
            moves.fetch_add(n, std::memory_order_relaxed);
          }
        }
      });
  for (auto& t : ts) t.join();
  if (lost || twice) FAIL("array queue groups: %d entries out of range, %d held twice", lost.load(), twice.load());
  const unsigned queue_chunks = Q.queue_chunks();
  if (queue_chunks > Q.most_queue_chunks)
    FAIL("array queue groups: %u queue chunks after %" PRIu64 " takes", queue_chunks, moves.load());
  std::printf("  array queue groups: %u warps, %" PRIu64 " takes in groups, %u queue chunks left\n", warps, moves.load(),
              queue_chunks);
}

void test_layouts() {
  using namespace gpualloc::strategies;
  int plans = 0;
  for (std::uint64_t bytes = 1024; bytes <= (std::uint64_t{80} << 30); bytes = bytes * 3 / 2 + 4096) {
    check_layout<ouroboros_p_s>("p-s", bytes);
    check_layout<ouroboros_p_va>("p-va", bytes);
    check_layout<ouroboros_p_vl>("p-vl", bytes);
    check_layout<ouroboros_c_s>("c-s", bytes);
    check_layout<ouroboros_c_va>("c-va", bytes);
    check_layout<ouroboros_c_vl>("c-vl", bytes);
    plans += 6;
  }
  std::printf("  layout: %d plans, 1 KiB .. 80 GiB\n", plans);
}

void test_sizes() {
  namespace ouro = gpualloc::strategies::ouro;
  for (std::uint64_t b = 16; b <= ouro::chunk_bytes; b += 16) {
    const unsigned c = ouro::class_of(b);
    const std::uint64_t page = ouro::page_bytes(c);
    if (c >= ouro::page_classes || page < b || page > 2 * b || (b > 256 && page * 2 > b * 3))
      FAIL("sizes: %" PRIu64 " B gets size %u, a page of %" PRIu64 " B", b, c, page);
    if (std::uint64_t{ouro::pages_per_chunk(c)} * page != ouro::span_of(c) * ouro::chunk_bytes)
      FAIL("sizes: the pages of size %u do not fill their chunk", c);
  }
  std::printf("  sizes: 16 B .. 8 KiB\n");
}

// --report: one heap per measurement (utilisation.h), filled by one thread.
struct heap : utilisation::heap {
  heap(gpualloc::strategy_id id, std::uint64_t bytes) : utilisation::heap(id, bytes) {}
  std::vector<void*> fill(std::uint64_t size) {
    std::vector<void*> got;
    for (void* p; (p = gpualloc::heap_malloc(get(), size)) != nullptr;) got.push_back(p);
    return got;
  }
  void release(std::vector<void*>& blocks) {
    std::shuffle(blocks.begin(), blocks.end(), std::mt19937(3));
    for (void* p : blocks) gpualloc::heap_free(get(), p);
    blocks.clear();
  }
  double share(std::size_t n, std::uint64_t size) const { return 100.0 * n * size / arena(); }
};

void report() {
  const std::uint64_t bytes = std::uint64_t{64} << 20;
  std::printf("report: 64 MiB heaps; A -> B: all of size A until NULL, free all (shuffled), then size B until NULL\n");
  for (const gpualloc::strategy_info& s : gpualloc::strategy_table) {
    if (s.name.substr(0, 10) != "ouroboros-") continue;
    heap first(s.id, bytes);
    std::printf("  %-15.*s 16 B until NULL: %5.1f%% |", (int)s.name.size(), s.name.data(),
                first.share(first.fill(16).size(), 16));
    const std::uint64_t pairs[][2] = {{16, 4096}, {4096, 64}, {64, 9000}, {1024, 256}};
    for (const auto& pair : pairs) {
      heap x(s.id, bytes);
      std::vector<void*> a = x.fill(pair[0]);
      const double before = x.share(a.size(), pair[0]);
      x.release(a);
      std::printf(" %" PRIu64 "->%" PRIu64 ": %.1f%%->%.1f%%", pair[0], pair[1], before,
                  x.share(x.fill(pair[1]).size(), pair[1]));
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc > 1 && std::string_view(argv[1]) == "--report") {
    report();
    return 0;
  }
  std::printf("ouroboros parts\n");
  test_semaphore(60);
  test_semaphore(12);
  test_index_slots();
  test_bit_field();
  test_list_queues();
  test_list_queue_placement(false);
  test_list_queue_placement(true);
  test_chunk_hints<gpualloc::strategies::ouroboros_c_s>(gpualloc::strategy_id::ouroboros_c_s, "c-s");
  test_chunk_hints<gpualloc::strategies::ouroboros_c_va>(gpualloc::strategy_id::ouroboros_c_va, "c-va");
  test_chunk_hints<gpualloc::strategies::ouroboros_c_vl>(gpualloc::strategy_id::ouroboros_c_vl, "c-vl");
  test_array_queue();
  test_array_queue_groups();
  test_layouts();
  test_sizes();
  std::printf("%s\n", failures.load() == 0 ? "ok" : "FAILED");
  return failures.load() == 0 ? 0 : 1;
}
