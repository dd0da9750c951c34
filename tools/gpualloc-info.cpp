// gpualloc-info: the registered strategies, straight from the registry.
//
//   gpualloc-info [--list]   a table: name, reuse, largest request, summary
//   gpualloc-info --names    one name per line (scripts, the test runner)
//   gpualloc-info --markdown the README's strategy table
//   gpualloc-info --help
#include <cstdio>
#include <cstring>
#include <string>

#include "gpualloc/registry.h"

namespace {

using gpualloc::strategy_info;
using gpualloc::strategy_table;

std::string str(std::string_view s) { return std::string(s); }

bool is_default(const strategy_info& s) { return s.id == gpualloc::default_strategy; }

void list() {
  std::size_t name_width = 8, largest_width = 15;
  for (const strategy_info& s : strategy_table) {
    name_width = std::max(name_width, s.name.size() + (is_default(s) ? 2 : 0));
    largest_width = std::max(largest_width, s.largest_request.size());
  }
  std::printf("%-*s  %-6s  %-*s  %s\n", int(name_width), "strategy", "reuse", int(largest_width), "largest request",
              "summary");
  for (const strategy_info& s : strategy_table)
    std::printf("%-*s  %-6s  %-*s  %s\n", int(name_width), (str(s.name) + (is_default(s) ? " *" : "")).c_str(),
                str(gpualloc::reuse_policy_name(s.reuse)).c_str(), int(largest_width), str(s.largest_request).c_str(),
                str(s.summary).c_str());
  std::printf("\n* default (when GPUALLOC_STRATEGY is not set)\n");
}

void names() {
  for (const strategy_info& s : strategy_table) std::printf("%s\n", str(s.name).c_str());
}

// Escapes the characters that would break a Markdown table cell.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

void markdown() {
  std::printf("| Strategy | Reuse of freed memory | Largest request | Summary |\n");
  std::printf("| --- | --- | --- | --- |\n");
  for (const strategy_info& s : strategy_table)
    std::printf("| `%s`%s | %s | %s | %s |\n", str(s.name).c_str(), is_default(s) ? " (default)" : "",
                str(gpualloc::reuse_policy_name(s.reuse)).c_str(), cell(s.largest_request).c_str(),
                cell(s.summary).c_str());
}

void help(std::FILE* out) {
  std::fprintf(out,
               "usage: gpualloc-info [--list | --names | --markdown | --help]\n"
               "\n"
               "Lists the device allocation strategies gpualloc was built with; pick one at run\n"
               "time with GPUALLOC_STRATEGY=<name>.\n"
               "\n"
               "  --list      a table: name, reuse, largest request, summary (the default)\n"
               "  --names     one name per line\n"
               "  --markdown  the README's strategy table\n"
               "  --help      this text\n"
               "\n"
               "Reuse: none (free is a no-op), unsafe (memory may be handed out again while\n"
               "still in use), full (freed memory is reused, live memory never is).\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    help(stderr);
    return 2;
  }
  const char* option = argc == 2 ? argv[1] : "--list";
  if (!std::strcmp(option, "--list")) list();
  else if (!std::strcmp(option, "--names")) names();
  else if (!std::strcmp(option, "--markdown")) markdown();
  else if (!std::strcmp(option, "--help") || !std::strcmp(option, "-h")) help(stdout);
  else {
    std::fprintf(stderr, "gpualloc-info: unknown option '%s'\n", option);
    help(stderr);
    return 2;
  }
  return 0;
}
