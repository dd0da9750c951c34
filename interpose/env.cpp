// Parsing of the GPUALLOC_* variables. Pure functions: no CUDA, no globals.
#include "env.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace gpualloc::env {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// Multiplier of a size suffix ("", "k", "KiB", "MB", "g"...), 0 if unknown.
std::uint64_t suffix_multiplier(std::string_view suffix) {
  if (suffix.empty() || iequals(suffix, "b")) return 1;
  static constexpr std::string_view units = "kmgt";
  std::size_t power = units.find(static_cast<char>(std::tolower(static_cast<unsigned char>(suffix[0]))));
  if (power == std::string_view::npos) return 0;
  std::string_view rest = suffix.substr(1);
  if (!(rest.empty() || iequals(rest, "b") || iequals(rest, "ib"))) return 0;
  return std::uint64_t{1} << (10 * (power + 1));
}

}  // namespace

std::uint64_t heap_size::resolve(std::uint64_t free_bytes) const {
  switch (how) {
    case kind::bytes: return bytes;
    case kind::percent: return static_cast<std::uint64_t>(static_cast<long double>(free_bytes) * percent / 100.0L);
    case kind::unset: break;
  }
  return 0;
}

parsed<heap_size> parse_heap_size(std::string_view text) {
  parsed<heap_size> out;
  const std::string shown(text);
  std::string_view s = trim(text);
  auto fail = [&](const char* why) {
    out.error = "gpualloc: bad GPUALLOC_HEAP_SIZE '" + shown + "': " + why +
                " (examples: 512M, 8G, 1.5G, 1048576, 25%)";
    return out;
  };
  if (s.empty()) return fail("empty");

  // The number: digits with an optional fraction, no sign, no exponent.
  std::size_t end = 0;
  bool digits = false;
  while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) ++end, digits = true;
  if (end < s.size() && s[end] == '.') {
    ++end;
    while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) ++end, digits = true;
  }
  if (!digits) return fail("not a number");
  double number = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + end, number);
  if (ec != std::errc() || ptr != s.data() + end) return fail("not a number");
  std::string_view suffix = trim(s.substr(end));

  if (suffix == "%") {
    if (!(number > 0)) return fail("must be more than 0%");
    if (number > 100) return fail("a percentage of free memory must be at most 100%");
    out.value.how = heap_size::kind::percent;
    out.value.percent = number;
    return out;
  }
  std::uint64_t multiplier = suffix_multiplier(suffix);
  if (multiplier == 0) return fail("unknown unit (use K, M, G, T, or %)");
  long double bytes = static_cast<long double>(number) * static_cast<long double>(multiplier);
  if (bytes > static_cast<long double>(largest_heap_bytes)) return fail("larger than any device (at most 64 PiB)");
  out.value.how = heap_size::kind::bytes;
  out.value.bytes = static_cast<std::uint64_t>(std::floor(bytes));
  if (out.value.bytes == 0) return fail("must be more than 0 bytes");
  return out;
}

std::string valid_strategy_names() {
  std::string names;
  for (const strategy_info& s : strategy_table) {
    if (!names.empty()) names += ", ";
    names += s.name;
  }
  return names;
}

parsed<strategy_id> parse_strategy(std::string_view name) {
  parsed<strategy_id> out;
  if (const strategy_info* s = find_strategy(name)) {
    out.value = s->id;
  } else {
    out.error = "gpualloc: unknown strategy '" + std::string(name) + "' in GPUALLOC_STRATEGY; valid: " +
                valid_strategy_names();
  }
  return out;
}

parsed<bool> parse_switch(std::string_view name, const char* value) {
  parsed<bool> out;
  if (value == nullptr) return out;
  std::string_view v = trim(value);
  for (std::string_view off : {"", "0", "no", "off", "false"})
    if (iequals(v, off)) return out;
  for (std::string_view on : {"1", "yes", "on", "true"})
    if (iequals(v, on)) {
      out.value = true;
      return out;
    }
  out.error = "gpualloc: bad " + std::string(name) + " '" + value + "' (use 1 or 0)";
  return out;
}

parsed<std::uint32_t> parse_rw_unit(const char* value) {
  parsed<std::uint32_t> out;
  const std::string_view v = trim(value);
  std::uint64_t bytes = 0;
  bool digits = !v.empty() && v.size() <= 5;
  for (char ch : v) digits = digits && ch >= '0' && ch <= '9', bytes = bytes * 10 + static_cast<std::uint64_t>(ch - '0');
  if (digits && bytes >= 64 && bytes <= 4096 && (bytes & (bytes - 1)) == 0)
    out.value = static_cast<std::uint32_t>(bytes);
  else
    out.error = "gpualloc: bad GPUALLOC_RW_UNIT '" + std::string(value) + "' (bytes: a power of two from 64 to 4096)";
  return out;
}

std::uint64_t default_heap_bytes(std::uint64_t free_bytes) {
  std::uint64_t eighth = free_bytes / 8;
  return eighth > default_heap_minimum ? eighth : default_heap_minimum;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && unit < 4) v /= 1024, ++unit;
  char buffer[48];
  if (unit == 0 || v == std::floor(v))
    std::snprintf(buffer, sizeof buffer, "%.0f %s", v, units[unit]);
  else
    std::snprintf(buffer, sizeof buffer, "%.2f %s", v, units[unit]);
  return buffer;
}

parsed<config> load_config(getenv_fn get, void* user) {
  parsed<config> out;
  if (const char* s = get("GPUALLOC_STRATEGY", user); s != nullptr && *s != '\0') {
    auto strategy = parse_strategy(trim(s));
    if (!strategy.ok()) return {{}, strategy.error};
    out.value.strategy = strategy.value;
  }
  if (const char* s = get("GPUALLOC_HEAP_SIZE", user); s != nullptr) {
    auto size = parse_heap_size(s);
    if (!size.ok()) return {{}, size.error};
    out.value.heap = size.value;
  }
  struct {
    const char* name;
    bool config::*field;
  } switches[] = {{"GPUALLOC_STATS", &config::stats},
                  {"GPUALLOC_CHECK", &config::check},
                  {"GPUALLOC_VERBOSE", &config::verbose}};
  for (auto& sw : switches) {
    auto on = parse_switch(sw.name, get(sw.name, user));
    if (!on.ok()) return {{}, on.error};
    out.value.*sw.field = on.value;
  }
  if (const char* s = get("GPUALLOC_RW_UNIT", user); s != nullptr && *s != '\0') {
    auto unit = parse_rw_unit(s);
    if (!unit.ok()) return {{}, unit.error};
    out.value.rw_unit_bytes = unit.value;
  }
  // On unless turned off.
  if (const char* s = get("GPUALLOC_COALESCE", user); s != nullptr && *s != '\0') {
    auto on = parse_switch("GPUALLOC_COALESCE", s);
    if (!on.ok()) return {{}, on.error};
    out.value.coalesce = on.value;
  }
  return out;
}

}  // namespace gpualloc::env
