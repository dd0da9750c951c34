// gpualloc-bench-getpage: GETPAGE of the random walk (Pham et al., "Dynamic
// Buffer Management in Massively Parallel Systems: A Case on GPUs", ICDE
// 2022), section V-B1 and Figure 11: N threads take one page each from a pool
// of T pages of which a given fraction is free; the program measures the
// kernel time and the steps that section III-B predicts, beside the formulas.
//
//   gpualloc-bench-getpage [--pages T] [--free 50,10,1,0.5] [--threads 32,64,...]
//                          [--methods queue,rw,rw-bm,corw,crw] [--reps R]
//                          [--max-steps S] [--seed X] [--csv] [--formulas]
//
// Methods. The walks are the runtime's (strategies/random_walk/walks.h), run
// on a bitmap of the program's own (cudaMalloc, not the gpualloc heap):
//   queue  the paper's baseline (section V-A): the free pages in an array, a
//          thread takes the one at an atomic counter; its steps = its
//          position in the queue (the first thread 1 step)
//   rw     Algorithm 1 (walk_units: one page per step)
//   rw-bm  Algorithm 2 (walk_words: one 32-bit word per step, the LockMap)
//   corw   Algorithm 3 (walk_pooled: the warp's lanes walk together)
//   crw    Algorithm 5: one step for the page after the thread's last page,
//          then Algorithm 1 if that page is used. Each thread's last page is
//          a distinct *used* page of the same pool, drawn at random (while
//          N <= T - A), kept in an array: so crw runs on exactly the pool the
//          other methods run on (the same T, A and free positions) and one
//          kernel is one GETPAGE per thread. With the free pages at random
//          positions, the page after a thread's last page is free with
//          probability about A/T whichever way the thread got that page
//          (a warm-up GETPAGE per thread would change nothing but A).
//
// A point (method, free fraction, N): A = round(free% * T) free pages at
// random positions (a seeded permutation of the pages on the host: its first
// A are free, and the queue holds them in that order). N > A is skipped (not
// every thread can get a page; the skipped N are listed after the table).
// One untimed warm-up run, then --reps timed runs; before each run the
// bitmap is restored, every lock cleared and the queue's counter zeroed. A
// timed run is gated (timing.h): its kernel is already queued when the event
// pair around it starts. Every run is checked: no page handed out twice, each
// one free before, the bitmap afterwards exactly the one before plus the
// pages handed out, no lock left held, no walk given up (after --max-steps).
//
// Columns: time_ms = median kernel time; tas = mean steps per thread, was =
// mean over warps (32 consecutive threads) of the warp's largest step count,
// both averaged over the timed runs; tas_eq and was_eq = section III-B's
// values for the same T, A, N (eqs names them):
//   queue  Eq. 1 (N+1)/2, and Eq. 2 as the sum it approximates (32N/33),
//          sum_{k<N} (1 - (k/N)^32)
//   rw     Eq. 3 as the sum it approximates, (T/N) sum_{j<N} 1/(A-j) (Eq. 3's
//          (T/N) ln(A/(A-N)) differs from it by < 0.1 % unless N is near A,
//          and is infinite at N = A), and the bound Eq. 4
//   rw-bm  Eq. 5 and the bound Eq. 6, w = 32
//   corw   the paper gives no formula: RW-BM's (Eq. 5 and 6) are printed
//   crw    Eq. 9, M = the free clusters of the pool as built, and the bound
//          Eq. 4 (section IV-D: CRW's WAS is bounded by RW's)
// --formulas prints the formula columns only, without a GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common.h"
#include "gpualloc/detail/random.h"
#include "gpualloc/detail/unit_bitmap.h"
#include "gpualloc/detail/warp.h"
#include "gpualloc/strategies/random_walk/walks.h"
#include "timing.h"

namespace {

using gpualloc::detail::lane_group;
using gpualloc::detail::unit_bitmap;
using gpualloc::detail::walk_random;
using gpualloc::random_walk_parts::found_unit;
using gpualloc::random_walk_parts::no_unit;

constexpr std::uint32_t no_page = 0xffffffffu;  // in a thread's page slot: its walk gave up
constexpr unsigned kBlock = 256;

enum class method { queue, rw, rw_bm, corw, crw };
const char* const method_names[] = {"queue", "rw", "rw-bm", "corw", "crw"};

// ---- the kernels: one GETPAGE per thread ---------------------------------

// Where each thread's GETPAGE ended: its page and its steps.
struct outcomes {
  std::uint32_t* page;
  std::uint32_t* steps;
};

__device__ inline std::uint64_t thread_id() { return blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; }

__device__ inline void record(outcomes out, std::uint64_t t, found_unit f) {
  out.page[t] = f.unit == no_unit ? no_page : static_cast<std::uint32_t>(f.unit);
  out.steps[t] = f.steps;
}

__global__ void k_queue(const std::uint32_t* free_pages, unsigned* head, std::uint64_t n, outcomes out) {
  const std::uint64_t t = thread_id();
  if (t >= n) return;
  const unsigned position = atomicAdd(head, 1u);
  out.page[t] = free_pages[position];
  out.steps[t] = position + 1;
}

__global__ void k_rw(unit_bitmap bm, std::uint64_t pages, std::uint64_t n, std::uint32_t max_steps, outcomes out) {
  const std::uint64_t t = thread_id();
  if (t >= n) return;
  walk_random rng = walk_random::seeded();
  record(out, t, gpualloc::random_walk_parts::walk_units(bm, pages, rng, max_steps));
}

__global__ void k_rw_bm(unit_bitmap bm, std::uint64_t n, std::uint32_t max_steps, outcomes out) {
  const std::uint64_t t = thread_id();
  if (t >= n) return;
  walk_random rng = walk_random::seeded();
  record(out, t, gpualloc::random_walk_parts::walk_words(bm, rng, max_steps));
}

__global__ void k_corw(unit_bitmap bm, std::uint64_t n, std::uint32_t max_steps, outcomes out) {
  const std::uint64_t t = thread_id();
  if (t >= n) return;
  const lane_group group = lane_group::coalesced();  // the lanes are still together here
  walk_random rng = walk_random::seeded();
  record(out, t, gpualloc::random_walk_parts::walk_pooled(group, bm, rng, max_steps));
}

// Algorithm 5: the page after the thread's last page is one step; a walk follows if it is used.
__global__ void k_crw(unit_bitmap bm, std::uint64_t pages, const std::uint32_t* last, std::uint64_t n,
                      std::uint32_t max_steps, outcomes out) {
  const std::uint64_t t = thread_id();
  if (t >= n) return;
  const std::uint64_t next = std::uint64_t{last[t]} + 1;
  found_unit f;
  f.steps = 1;
  if (next < pages && (bm.read(next / 32) >> (next % 32) & 1u) == 0 && bm.claim_unit(next)) {
    f.unit = next;
  } else {
    walk_random rng = walk_random::seeded();
    const found_unit walked = gpualloc::random_walk_parts::walk_units(bm, pages, rng, max_steps);
    f.unit = walked.unit;
    f.steps += walked.steps;
  }
  record(out, t, f);
}

// ---- section III-B's predictions: T pages, A free, N threads -------------

// Eq. 2 as the sum the paper derives before approximating it by 32N/33:
// the expected largest of 32 positions uniform on [1, N].
double queue_was(std::uint64_t n) {
  double sum = 0;
  for (std::uint64_t k = 0; k < n; ++k) sum += 1 - std::pow(static_cast<double>(k) / n, 32);
  return sum;
}

// 1 - ((T - a) / T)^w: the chance that a probe of w pages meets one of a free ones.
double hit(double pages, double free, int w) { return -std::expm1(w * std::log1p(-free / pages)); }

// Eq. 5: (1/N) sum_{j<N} 1 / (1 - ((T - A + j) / T)^w). With w = 1 it is
// (T/N) sum_{j<N} 1/(A - j), the sum that Eq. 3 approximates.
double walk_tas(double pages, double free, std::uint64_t n, int w) {
  double sum = 0;
  for (std::uint64_t j = 0; j < n; ++j) sum += 1 / hit(pages, free - j, w);
  return sum / n;
}

// Eq. 6 (Eq. 4 with w = 1): sum_{k>=0} [1 - (1 - q^(wk))^32], q = (T - A + N) / T.
double walk_was_bound(double pages, double free, double n, int w) {
  if (n >= free) return INFINITY;  // q = 1
  const double log_qw = w * std::log1p(-(free - n) / pages);
  const double shrink = -std::expm1(log_qw);  // 1 - q^w: late terms shrink by q^w each
  double sum = 0;
  for (std::uint64_t k = 0;; ++k) {
    const double term = -std::expm1(32 * std::log1p(-std::exp(log_qw * k)));
    sum += term;
    if (term < 1e-12 * shrink * sum) break;  // the rest, below term / (1 - q^w), is negligible
  }
  return sum;
}

// ---- the pool --------------------------------------------------------------

// T pages, A of them free at random positions.
struct pool {
  std::uint64_t pages = 0, free = 0;
  std::uint64_t clusters = 0;        // runs of consecutive free pages (Eq. 9's M)
  std::vector<std::uint32_t> order;  // a random permutation of the pages; order[0, free) are the free ones
  std::vector<std::uint32_t> used;   // the bitmap, bit set = used; the last word's tail set (as unit_bitmap::init)

  bool is_used(std::uint64_t p) const { return (used[p / 32] >> (p % 32) & 1u) != 0; }
  // Thread i's last page (crw): a used page, distinct for i < pages - free.
  std::uint32_t last_page(std::uint64_t i) const {
    return pages > free ? order[free + i % (pages - free)] : order[i % pages];
  }
};

pool make_pool(std::uint64_t pages, std::uint64_t free, std::uint64_t seed) {
  pool p;
  p.pages = pages;
  p.free = free;
  p.order.resize(pages);
  std::iota(p.order.begin(), p.order.end(), 0u);
  std::mt19937_64 rng(seed);
  std::shuffle(p.order.begin(), p.order.end(), rng);
  p.used.assign(unit_bitmap::words_for(pages), ~0u);
  for (std::uint64_t i = 0; i < free; ++i) p.used[p.order[i] / 32] &= ~(1u << (p.order[i] % 32));
  for (std::uint64_t q = 0; q < pages; ++q)
    if (!p.is_used(q) && (q == 0 || p.is_used(q - 1))) ++p.clusters;
  return p;
}

template <class T>
struct device_array {
  T* p = nullptr;
  size_t n = 0;
  explicit device_array(size_t count) : n(std::max<size_t>(count, 1)) { BENCH_CUDA(cudaMalloc(&p, n * sizeof(T))); }
  ~device_array() { cudaFree(p); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  void upload(const std::vector<T>& v) { BENCH_CUDA(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> download(size_t count) const {
    std::vector<T> v(count);
    BENCH_CUDA(cudaMemcpy(v.data(), p, count * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }
};

// The pool on the device, with room for the outcomes of up to max_threads threads.
struct device_pool {
  const pool& host;
  device_array<std::uint32_t> used, locks, pristine, free_pages, last, page, steps;
  device_array<unsigned> head;  // the queue's counter

  device_pool(const pool& P, std::uint64_t max_threads)
      : host(P), used(P.used.size()), locks(unit_bitmap::lock_words_for(P.pages)), pristine(P.used.size()),
        free_pages(P.free), last(max_threads), page(max_threads), steps(max_threads), head(1) {
    pristine.upload(P.used);
    free_pages.upload(std::vector<std::uint32_t>(P.order.begin(), P.order.begin() + P.free));
    std::vector<std::uint32_t> lasts(max_threads);
    for (std::uint64_t i = 0; i < max_threads; ++i) lasts[i] = P.last_page(i);
    last.upload(lasts);
  }

  unit_bitmap bitmap() const { return unit_bitmap{used.p, locks.p, host.used.size()}; }

  // Before every run: the bitmap as built, no lock held, the queue's counter at 0.
  void restore() {
    BENCH_CUDA(cudaMemcpyAsync(used.p, pristine.p, used.n * sizeof(std::uint32_t), cudaMemcpyDeviceToDevice));
    BENCH_CUDA(cudaMemsetAsync(locks.p, 0, locks.n * sizeof(std::uint32_t)));
    BENCH_CUDA(cudaMemsetAsync(head.p, 0, sizeof(unsigned)));
  }

  void launch(method m, std::uint64_t n, std::uint32_t max_steps) {
    const auto block = static_cast<unsigned>(n < kBlock ? (n + 31) / 32 * 32 : kBlock);
    const auto grid = static_cast<unsigned>((n + block - 1) / block);
    const outcomes out{page.p, steps.p};
    switch (m) {
      case method::queue: k_queue<<<grid, block>>>(free_pages.p, head.p, n, out); break;
      case method::rw: k_rw<<<grid, block>>>(bitmap(), host.pages, n, max_steps, out); break;
      case method::rw_bm: k_rw_bm<<<grid, block>>>(bitmap(), n, max_steps, out); break;
      case method::corw: k_corw<<<grid, block>>>(bitmap(), n, max_steps, out); break;
      case method::crw: k_crw<<<grid, block>>>(bitmap(), host.pages, last.p, n, max_steps, out); break;
    }
    BENCH_CUDA(cudaGetLastError());
  }
};

// ---- one point -------------------------------------------------------------

struct problems {
  std::uint64_t unserved = 0, not_free = 0, twice = 0, bitmap_words = 0, locks_held = 0;
  bool gate_timed_out = false;

  std::string text() const {
    std::string s;
    auto add = [&](const char* what, std::uint64_t count) {
      if (count) s += (s.empty() ? "" : " ") + std::string(what) + "=" + std::to_string(count);
    };
    add("unserved", unserved);
    add("not-free", not_free);
    add("twice", twice);
    add("bitmap-words", bitmap_words);
    add("locks-held", locks_held);
    if (gate_timed_out) s += s.empty() ? "gate-timed-out" : " gate-timed-out";
    return s.empty() ? "ok" : s;
  }
};

// One run's pages against the pool: each free before and handed out once;
// the bitmap afterwards (empty: not checked) the one before plus exactly
// those pages; no lock held.
void check(const pool& P, const std::vector<std::uint32_t>& pages, const std::vector<std::uint32_t>& used_after,
           const std::vector<std::uint32_t>& locks_after, problems& found) {
  std::vector<std::uint32_t> expected = P.used;
  for (const std::uint32_t p : pages) {
    if (p == no_page) {
      ++found.unserved;
    } else if (p >= P.pages || P.is_used(p)) {
      ++found.not_free;
    } else {
      const std::uint32_t bit = 1u << (p % 32);
      if (expected[p / 32] & bit) ++found.twice;
      expected[p / 32] |= bit;
    }
  }
  if (!used_after.empty())
    for (size_t w = 0; w < expected.size(); ++w) found.bitmap_words += used_after[w] != expected[w];
  for (const std::uint32_t l : locks_after) found.locks_held += l != 0;
}

double thread_average(const std::vector<std::uint32_t>& steps) {
  return std::accumulate(steps.begin(), steps.end(), 0.0) / static_cast<double>(steps.size());
}

double warp_average(const std::vector<std::uint32_t>& steps) {
  double sum = 0;
  for (size_t first = 0; first < steps.size(); first += 32)
    sum += *std::max_element(steps.begin() + first, steps.begin() + std::min(first + 32, steps.size()));
  return sum / static_cast<double>((steps.size() + 31) / 32);
}

struct measurement {
  double median_ms = 0, tas = 0, was = 0;
  problems found;
};

measurement measure(method m, device_pool& D, std::uint64_t n, int reps, std::uint32_t max_steps) {
  measurement r;
  bench::gate& gate = bench::the_gate();
  bench::marks marks(2);
  std::vector<double> ms;
  for (int run = 0; run <= reps; ++run) {
    const bool timed = run > 0;  // run 0, the warm-up, loads the kernel: ungated (timing.h)
    if (timed) gate.close();
    D.restore();
    marks.at(0);
    D.launch(m, n, max_steps);
    marks.at(1);
    if (timed) gate.open();
    BENCH_CUDA(cudaDeviceSynchronize());
    BENCH_CUDA(cudaGetLastError());
    const std::vector<std::uint32_t> pages = D.page.download(n), steps = D.steps.download(n);
    std::vector<std::uint32_t> used_after, locks_after;
    if (m != method::queue) {
      used_after = D.used.download(D.used.n);
      locks_after = D.locks.download(D.locks.n);
    }
    check(D.host, pages, used_after, locks_after, r.found);
    if (!timed) continue;
    r.found.gate_timed_out |= gate.timed_out();
    ms.push_back(marks.ms(0, 1));
    r.tas += thread_average(steps) / reps;
    r.was += warp_average(steps) / reps;
  }
  r.median_ms = bench::summarize(ms).median;
  return r;
}

struct prediction {
  double tas, was;
  const char* eqs;
};

prediction predict(method m, const pool& P, std::uint64_t n) {
  const double T = static_cast<double>(P.pages), A = static_cast<double>(P.free);
  const double M = static_cast<double>(P.clusters);
  switch (m) {
    case method::queue: return {(n + 1) / 2.0, queue_was(n), "1/2"};
    case method::rw: return {walk_tas(T, A, n, 1), walk_was_bound(T, A, n, 1), "3/4"};
    case method::rw_bm: return {walk_tas(T, A, n, 32), walk_was_bound(T, A, n, 32), "5/6"};
    case method::corw: return {walk_tas(T, A, n, 32), walk_was_bound(T, A, n, 32), "none (5/6)"};
    case method::crw:
      return {1 + (M - 1) / (A + M - 1) * walk_tas(T, A, n, 1), walk_was_bound(T, A, n, 1), "9/4"};
  }
  return {};
}

// ---- output ----------------------------------------------------------------

std::string fmt(const char* format, double v) {
  if (std::isinf(v)) return "inf";
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

// Rows as CSV (--csv) or as a Markdown table.
struct table {
  bool csv;
  void row(const std::vector<std::string>& cells) const {
    std::string line = csv ? "" : "| ";
    for (size_t i = 0; i < cells.size(); ++i) line += (i ? (csv ? "," : " | ") : "") + cells[i];
    std::printf("%s%s\n", line.c_str(), csv ? "" : " |");
    std::fflush(stdout);
  }
  void header() const {
    const std::vector<std::string> names = {"method", "free_pct", "A", "N",      "time_ms", "tas",
                                            "tas_eq", "was",      "was_eq", "eqs", "check"};
    row(names);
    if (!csv) row(std::vector<std::string>(names.size(), "---"));
  }
};

std::vector<double> numbers(const std::string& list) {
  std::vector<double> v;
  for (const std::string& s : bench::split(list, ',')) v.push_back(std::strtod(s.c_str(), nullptr));
  return v;
}

void usage() {
  std::printf(
      "usage: gpualloc-bench-getpage [--pages T] [--free 50,10,1,0.5] [--threads 32,64,...]\n"
      "                              [--methods queue,rw,rw-bm,corw,crw] [--reps R] [--max-steps S]\n"
      "                              [--seed X] [--csv] [--formulas]\n"
      "GETPAGE of Pham et al. (ICDE 2022, Figure 11): time, TAS and WAS against Eq. 1-6 and 9.\n"
      "Defaults: T = 2^20 pages, free 50,10,1,0.5 %%, threads 2^5 .. 2^20 (N > A skipped),\n"
      "all methods, 7 timed runs (median), max-steps 2^24, seed 1. --formulas: no GPU, formulas only.\n");
}

}  // namespace

int main(int argc, char** argv) {
  const bench::args a{argc, argv};
  if (a.flag("--help") || a.flag("-h")) {
    usage();
    return 0;
  }
  const auto pages = static_cast<std::uint64_t>(a.num("--pages", 1ll << 20));
  const std::vector<double> free_pcts = numbers(a.get("--free", "50,10,1,0.5"));
  std::vector<std::uint64_t> threads;
  if (const char* list = a.get("--threads")) {
    for (double d : numbers(list)) threads.push_back(static_cast<std::uint64_t>(d));
  } else {
    for (int e = 5; e <= 20; ++e) threads.push_back(std::uint64_t{1} << e);
  }
  std::vector<method> methods;
  for (const std::string& name : bench::split(a.get("--methods", "queue,rw,rw-bm,corw,crw"), ',')) {
    const auto* it = std::find_if(std::begin(method_names), std::end(method_names),
                                  [&](const char* m) { return name == m; });
    if (it == std::end(method_names)) bench::fatal("unknown method %s (queue, rw, rw-bm, corw, crw)", name.c_str());
    methods.push_back(static_cast<method>(it - std::begin(method_names)));
  }
  const int reps = static_cast<int>(a.num("--reps", 7));
  const auto max_steps = static_cast<std::uint32_t>(a.num("--max-steps", 1ll << 24));
  const auto seed = static_cast<std::uint64_t>(a.num("--seed", 1));
  const bool formulas_only = a.flag("--formulas");
  const table out{a.flag("--csv")};
  if (pages < 32 || pages >= no_page) bench::fatal("--pages must be in [32, 2^32 - 1)");
  if (reps < 1) bench::fatal("--reps must be at least 1");
  for (std::uint64_t n : threads)
    if (n == 0) bench::fatal("--threads: every count must be at least 1");

  if (formulas_only) {
    std::printf("# gpualloc-bench-getpage: formulas only, T = %llu pages\n", static_cast<unsigned long long>(pages));
  } else {
    cudaDeviceProp prop{};
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("# gpualloc-bench-getpage: %s, T = %llu pages, median of %d timed runs, seed %llu\n", prop.name,
                static_cast<unsigned long long>(pages), reps, static_cast<unsigned long long>(seed));
  }
  out.header();
  std::vector<std::string> skipped;
  for (const double pct : free_pcts) {
    const auto free = static_cast<std::uint64_t>(std::llround(pct / 100 * static_cast<double>(pages)));
    if (free == 0 || free > pages) bench::fatal("--free %g %% gives %llu free pages", pct, static_cast<unsigned long long>(free));
    std::vector<std::uint64_t> counts, too_many;
    for (std::uint64_t n : threads) (n <= free ? counts : too_many).push_back(n);
    if (!too_many.empty()) {
      std::string s = fmt("# free %g %%", pct) + ": A = " + std::to_string(free) + " pages, skipped N > A:";
      for (std::uint64_t n : too_many) s += " " + std::to_string(n);
      skipped.push_back(s);
    }
    if (counts.empty()) continue;
    const pool P = make_pool(pages, free, seed);
    const std::uint64_t most = *std::max_element(counts.begin(), counts.end());
    std::unique_ptr<device_pool> D;
    if (!formulas_only) D = std::make_unique<device_pool>(P, most);
    for (const method m : methods) {
      for (const std::uint64_t n : counts) {
        const prediction f = predict(m, P, n);
        std::string time = "-", tas = "-", was = "-", found = "-";
        if (D) {
          const measurement r = measure(m, *D, n, reps, max_steps);
          time = fmt("%.4g", r.median_ms);
          tas = fmt("%.3f", r.tas);
          was = fmt("%.3f", r.was);
          found = r.found.text();
        }
        out.row({method_names[static_cast<int>(m)], fmt("%g", pct), std::to_string(free), std::to_string(n), time, tas,
                 fmt("%.3f", f.tas), was, fmt("%.3f", f.was), f.eqs, found});
      }
    }
  }
  for (const std::string& s : skipped) std::printf("%s\n", s.c_str());
  return 0;
}
