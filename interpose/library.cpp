// Load-time setup of libgpualloc: the environment is read once, in a
// constructor, before any kernel can run. An unknown strategy or a bad heap
// size ends the process with status 1: a program never runs on with an
// allocator other than the one asked for.
#include <cstdlib>
#include <mutex>
#include <unistd.h>

#include "log.h"

namespace gpualloc::interpose {
namespace {

env::config load_or_exit() {
  auto get = [](const char* name, void*) -> const char* { return std::getenv(name); };
  env::parsed<env::config> parsed = env::load_config(get, nullptr);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.error.c_str());
    _exit(1);  // before any kernel, without running the program's exit handlers
  }
  return parsed.value;
}

}  // namespace

// Also reached before the constructor when another library's constructor
// calls the driver first; call_once makes both paths agree.
const env::config& settings() {
  static std::once_flag once;
  static env::config* config = nullptr;  // never destroyed: hooks may run during exit
  std::call_once(once, [] { config = new env::config(load_or_exit()); });
  return *config;
}

__attribute__((constructor)) static void gpualloc_load() {
  const env::config& c = settings();
  if (!c.verbose) return;
  char heap[64];
  switch (c.heap.how) {
    case env::heap_size::kind::bytes: std::snprintf(heap, sizeof heap, "%s", env::format_bytes(c.heap.bytes).c_str()); break;
    case env::heap_size::kind::percent: std::snprintf(heap, sizeof heap, "%g%% of free memory", c.heap.percent); break;
    case env::heap_size::kind::unset: std::snprintf(heap, sizeof heap, "from the program or the default"); break;
  }
  GPUALLOC_LOG("loaded: strategy %s, heap %s%s%s", std::string(strategy(c.strategy).name).c_str(), heap,
               c.stats ? ", statistics" : "", c.check ? ", checked mode" : "");
}

}  // namespace gpualloc::interpose
