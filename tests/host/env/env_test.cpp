// Host unit tests of libgpualloc's environment parsing (interpose/env.h).
// No framework: each CHECK prints what failed; the exit status is the count.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "env.h"
#include "expect.h"

namespace {

using namespace gpualloc;
using namespace gpualloc::env;

constexpr std::uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024, TiB = GiB * 1024;

std::uint64_t bytes_of(const char* text) {
  auto p = parse_heap_size(text);
  if (!p.ok()) {
    std::printf("  (parse_heap_size(\"%s\") failed: %s)\n", text, p.error.c_str());
    return 0;
  }
  return p.value.how == heap_size::kind::bytes ? p.value.bytes : 0;
}

bool rejected(const char* text) {
  auto p = parse_heap_size(text);
  return !p.ok() && p.error.rfind("gpualloc: bad GPUALLOC_HEAP_SIZE '", 0) == 0;
}

void sizes() {
  CHECK(bytes_of("4096") == 4096);
  CHECK(bytes_of("1") == 1);
  CHECK(bytes_of("512M") == 512 * MiB);
  CHECK(bytes_of("512m") == 512 * MiB);
  CHECK(bytes_of("512MB") == 512 * MiB);
  CHECK(bytes_of("512MiB") == 512 * MiB);
  CHECK(bytes_of("512 MiB") == 512 * MiB);
  CHECK(bytes_of(" 8G ") == 8 * GiB);
  CHECK(bytes_of("8g") == 8 * GiB);
  CHECK(bytes_of("1.5G") == 3 * GiB / 2);
  CHECK(bytes_of("0.5K") == 512);
  CHECK(bytes_of("64K") == 64 * KiB);
  CHECK(bytes_of("64kib") == 64 * KiB);
  CHECK(bytes_of("2T") == 2 * TiB);
  CHECK(bytes_of("100B") == 100);
  CHECK(rejected("16E"));  // exabytes are not a unit here
}

void percentages() {
  auto p = parse_heap_size("25%");
  CHECK(p.ok());
  CHECK(p.value.how == heap_size::kind::percent);
  CHECK(p.value.percent == 25);
  CHECK(p.value.resolve(8 * GiB) == 2 * GiB);
  CHECK(parse_heap_size("100%").ok());
  CHECK(parse_heap_size("100%").value.resolve(GiB) == GiB);
  CHECK(parse_heap_size("12.5%").value.resolve(8 * GiB) == GiB);
  CHECK(parse_heap_size(" 50 % ").ok());
  CHECK(rejected("0%"));
  CHECK(rejected("101%"));
  CHECK(rejected("%"));
}

void bad_sizes() {
  for (const char* bad : {"", " ", "0", "0M", "0.0G", "-1", "-5G", "abc", "M", "12Q", "1.5.2G", "1e9", "0x100",
                          "5GG", "5 G B", "99999999999T", "18446744073709551616", "nan", "inf", "0.4"})
    if (!rejected(bad)) {
      std::printf("FAIL: GPUALLOC_HEAP_SIZE '%s' was accepted\n", bad);
      ++failures;
    }
  // The message names the variable, the value, and examples.
  auto p = parse_heap_size("lots");
  CHECK(p.error.find("GPUALLOC_HEAP_SIZE 'lots'") != std::string::npos);
  CHECK(p.error.find("512M") != std::string::npos);
  CHECK(parse_heap_size("18446744073709551615").ok() == false ||
        parse_heap_size("18446744073709551615").value.bytes > 0);  // near 2^64: exact or refused, never 0
}

void unset_size_resolves_to_nothing() {
  heap_size unset;
  CHECK(!unset.is_set());
  CHECK(unset.resolve(GiB) == 0);
}

void defaults() {
  CHECK(default_heap_bytes(80 * GiB) == 10 * GiB);
  CHECK(default_heap_bytes(0) == default_heap_minimum);
  CHECK(default_heap_bytes(256 * MiB) == 64 * MiB);
  CHECK(default_heap_minimum == 64 * MiB);
}

void strategies() {
  // Every registered name parses to its own id; the list names all of them.
  std::string all = valid_strategy_names();
  for (const strategy_info& s : strategy_table) {
    auto p = parse_strategy(s.name);
    CHECK(p.ok());
    CHECK(p.value == s.id);
    CHECK(all.find(std::string(s.name)) != std::string::npos);
  }
  CHECK(all.rfind("cuda, atomic", 0) == 0);

  auto bad = parse_strategy("bogus");
  CHECK(!bad.ok());
  CHECK(bad.error == "gpualloc: unknown strategy 'bogus' in GPUALLOC_STRATEGY; valid: " + all);
  CHECK(!parse_strategy("Atomic").ok());  // names are exact, lower case
  CHECK(!parse_strategy("atomic ").ok());
  CHECK(!parse_strategy("").ok());
}

void switches() {
  CHECK(parse_switch("X", nullptr).ok() && !parse_switch("X", nullptr).value);
  for (const char* off : {"", "0", "no", "off", "false", "OFF", " 0 "}) {
    auto p = parse_switch("X", off);
    CHECK(p.ok() && !p.value);
  }
  for (const char* on : {"1", "yes", "on", "true", "TRUE", " 1"}) {
    auto p = parse_switch("X", on);
    CHECK(p.ok() && p.value);
  }
  auto bad = parse_switch("GPUALLOC_STATS", "2");
  CHECK(!bad.ok());
  CHECK(bad.error == "gpualloc: bad GPUALLOC_STATS '2' (use 1 or 0)");
}

// load_config over a fake environment.
using fake_env = std::map<std::string, std::string>;
const char* lookup(const char* name, void* user) {
  auto& env = *static_cast<fake_env*>(user);
  auto it = env.find(name);
  return it == env.end() ? nullptr : it->second.c_str();
}
parsed<config> load(fake_env env) { return load_config(lookup, &env); }

void configs() {
  auto empty = load({});
  CHECK(empty.ok());
  CHECK(empty.value.strategy == default_strategy);
  CHECK(!empty.value.heap.is_set());
  CHECK(!empty.value.stats && !empty.value.check && !empty.value.verbose);
  CHECK(empty.value.coalesce);  // coalescing is on unless turned off

  auto full = load({{"GPUALLOC_STRATEGY", "atomic"},
                    {"GPUALLOC_HEAP_SIZE", "1G"},
                    {"GPUALLOC_STATS", "1"},
                    {"GPUALLOC_CHECK", "1"},
                    {"GPUALLOC_VERBOSE", "1"}});
  CHECK(full.ok());
  CHECK(full.value.strategy == strategy_id::atomic);
  CHECK(full.value.heap.how == heap_size::kind::bytes && full.value.heap.bytes == GiB);
  CHECK(full.value.stats && full.value.check && full.value.verbose);

  CHECK(load({{"GPUALLOC_STRATEGY", ""}}).ok());  // set but empty: the default
  CHECK(load({{"GPUALLOC_STRATEGY", "bogus"}}).error.find("unknown strategy 'bogus'") != std::string::npos);
  CHECK(load({{"GPUALLOC_HEAP_SIZE", "0"}}).error.find("GPUALLOC_HEAP_SIZE '0'") != std::string::npos);
  CHECK(load({{"GPUALLOC_HEAP_SIZE", ""}}).error.find("GPUALLOC_HEAP_SIZE") != std::string::npos);
  CHECK(load({{"GPUALLOC_VERBOSE", "maybe"}}).error.find("GPUALLOC_VERBOSE") != std::string::npos);
  CHECK(load({{"GPUALLOC_HEAP_SIZE", "25%"}}).value.heap.how == heap_size::kind::percent);
  CHECK(load({{"GPUALLOC_HEAP_SIZE", "18446744073709551615"}}).error.find("larger than any device") !=
        std::string::npos);
  CHECK(load({{"GPUALLOC_HEAP_SIZE", "100P"}}).error.find("GPUALLOC_HEAP_SIZE") != std::string::npos);
  CHECK(!load({{"GPUALLOC_COALESCE", "0"}}).value.coalesce);
  CHECK(load({{"GPUALLOC_COALESCE", "1"}}).value.coalesce);
  CHECK(load({{"GPUALLOC_COALESCE", "sometimes"}}).error.find("GPUALLOC_COALESCE") != std::string::npos);
  CHECK(load({}).value.rw_unit_bytes == 0);
  CHECK(load({{"GPUALLOC_RW_UNIT", "64"}}).value.rw_unit_bytes == 64);
  CHECK(load({{"GPUALLOC_RW_UNIT", " 4096 "}}).value.rw_unit_bytes == 4096);
  for (const char* bad : {"32", "8192", "100", "256B", "-256", "99999999999"})
    CHECK(load({{"GPUALLOC_RW_UNIT", bad}}).error.find("bad GPUALLOC_RW_UNIT") != std::string::npos);
}

void formatting() {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(4096) == "4 KiB");
  CHECK(format_bytes(512 * MiB) == "512 MiB");
  CHECK(format_bytes(3 * GiB / 2) == "1.50 GiB");
  CHECK(format_bytes(1000) == "1000 B");
}

}  // namespace

int main() {
  sizes();
  percentages();
  bad_sizes();
  unset_size_resolves_to_nothing();
  defaults();
  strategies();
  switches();
  configs();
  formatting();
  if (failures == 0) std::printf("env_test: all passed\n");
  return failures == 0 ? 0 : 1;
}
