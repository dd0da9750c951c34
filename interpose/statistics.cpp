// The statistics table printed at exit (GPUALLOC_STATS=1), and a short
// summary of invalid frees in checked mode.
//
//   gpualloc: statistics (strategy atomic)
//   gpualloc: context device strategy     heap   mallocs  frees  failed  peak in use   in use
//   gpualloc:       1      0 atomic    1.00 GiB     1024   1024       0     16.0 KiB      0 B
//
// Bytes in use count the bytes programs asked for (not the strategy's
// rounding). Rows: contexts retired before exit first, then live ones.
#include "statistics.h"

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "checked_mode.h"
#include "driver.h"
#include "log.h"

namespace gpualloc::interpose {
namespace {

struct row {
  unsigned long long ctx_id;
  int device;
  strategy_id strategy;
  std::uint64_t heap_bytes;
  heap_counters counters;
  bool valid;
};

std::mutex& retired_lock() {
  static auto* m = new std::mutex();  // never destroyed
  return *m;
}

std::vector<row>& retired() {
  static auto* rows = new std::vector<row>();  // never destroyed
  return *rows;
}

row make_row(const context_heap& h, const heap_counters& c, bool valid) {
  return row{h.ctx_id, h.device, h.strategy, h.shown_bytes(), c, valid};
}

void print_rows(const std::vector<row>& rows) {
  std::fprintf(stderr, "gpualloc: %7s %6s %-14s %10s %12s %12s %10s %12s %12s\n", "context", "device", "strategy",
               "heap", "mallocs", "frees", "failed", "peak in use", "in use");
  for (const row& r : rows) {
    if (!r.valid) {
      std::fprintf(stderr, "gpualloc: %7llu %6d %-14s %10s  (counters unavailable)\n", r.ctx_id, r.device,
                   std::string(strategy(r.strategy).name).c_str(), env::format_bytes(r.heap_bytes).c_str());
      continue;
    }
    const heap_counters& c = r.counters;
    std::fprintf(stderr, "gpualloc: %7llu %6d %-14s %10s %12llu %12llu %10llu %12s %12s\n", r.ctx_id, r.device,
                 std::string(strategy(r.strategy).name).c_str(), env::format_bytes(r.heap_bytes).c_str(),
                 static_cast<unsigned long long>(c.mallocs), static_cast<unsigned long long>(c.frees),
                 static_cast<unsigned long long>(c.failed_mallocs), env::format_bytes(c.peak_bytes).c_str(),
                 env::format_bytes(c.bytes_in_use).c_str());
  }
}

void exit_report() {
  const env::config& c = settings();
  std::vector<row> rows;
  {
    std::lock_guard<std::mutex> lock(retired_lock());
    rows = retired();
  }
  for (const heap_ref& h : all_heaps()) {
    heap_counters counters{};
    bool valid = read_counters(*h, &counters, true) == CUDA_SUCCESS;
    rows.push_back(make_row(*h, counters, valid));
    if (valid) report_leaks(*h, counters, "the program exits");
  }
  if (c.stats) {
    std::fprintf(stderr, "gpualloc: statistics at exit\n");
    print_rows(rows);
  }
  if (c.check) {
    std::uint64_t doubles = 0, foreign = 0, overflows = 0, after_free = 0;
    for (const row& r : rows) {
      doubles += r.counters.double_frees, foreign += r.counters.foreign_frees, overflows += r.counters.overflows;
      after_free += r.counters.use_after_frees;
    }
    if (doubles + foreign + overflows + after_free != 0)
      std::fprintf(stderr,
                   "gpualloc: checked mode: %llu double free(s), %llu foreign free(s), %llu overflow(s), %llu use(s) "
                   "after free in this run\n",
                   static_cast<unsigned long long>(doubles), static_cast<unsigned long long>(foreign),
                   static_cast<unsigned long long>(overflows), static_cast<unsigned long long>(after_free));
  }
}

}  // namespace

void register_exit_report() {
  static std::once_flag once;
  if (!(settings().stats || settings().check)) return;
  std::call_once(once, [] { std::atexit(exit_report); });
}

void remember_retired(const context_heap& heap, const heap_counters& counters) {
  std::lock_guard<std::mutex> lock(retired_lock());
  retired().push_back(make_row(heap, counters, true));
}

}  // namespace gpualloc::interpose
