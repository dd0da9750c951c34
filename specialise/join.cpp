#include "join.h"

#include <algorithm>
#include <set>
#include <string>

#include "gpualloc/abi.h"
#include "inline_entries.h"
#include "ptx_text.h"

namespace gpualloc {
namespace {

bool is_header(const ptx::statement& st) {
  return st.directive == ".version" || st.directive == ".target" || st.directive == ".address_size";
}

bool defines(const ptx::statement& st) {
  return !st.name.empty() && st.link != ptx::linkage::external && (!st.is_function || st.has_body);
}

// A function definition with `trap` for its body: its header, up to the
// body's '{', kept.
std::string with_trap_body(std::string_view definition) {
  std::size_t i = 0;
  for (; i < definition.size() && definition[i] != '{'; ++i)
    if (definition.compare(i, 2, "//") == 0) i = std::min(definition.find('\n', i), definition.size() - 1);
  return std::string(definition.substr(0, i)) + "{\n\ttrap;\n\tret;\n}\n";
}

// Every occurrence of `from` in `text` replaced by `to`.
void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

bool is_checked_only(const ptx::statement& st) {
  return st.is_function && st.has_body && st.name.find(abi::checked_only_namespace) != std::string_view::npos;
}

}  // namespace

joined_module join(std::string_view user_ptx, std::string_view runtime_ptx, bool checked_heap) {
  const std::vector<ptx::statement> user = ptx::split(user_ptx), runtime = ptx::split(runtime_ptx);

  int user_version = -1, runtime_version = -1, user_sm = -1;
  std::set<std::string_view> user_defines, runtime_defines;
  for (const ptx::statement& st : user) {
    if (st.directive == ".version") user_version = ptx::version_number(st.text);
    if (st.directive == ".target") user_sm = ptx::target_sm(st.text);
    if (defines(st)) user_defines.insert(st.name);
  }
  for (const ptx::statement& st : runtime) {
    if (st.directive == ".version") runtime_version = ptx::version_number(st.text);
    if (defines(st)) runtime_defines.insert(st.name);
  }
  if (user_version < 0) return {{}, "the module has no .version directive: not PTX"};
  if (runtime_version < 0) return {{}, "the runtime has no .version directive: not PTX"};
  if (!runtime_defines.count(abi::malloc_entry)) return {{}, "the runtime does not define the entry points"};

  joined_module out;
  std::string& ptx = out.ptx;
  ptx.reserve(user_ptx.size() + runtime_ptx.size() + 256);
  // The user's header, with the higher PTX ISA version of the two.
  for (const ptx::statement& st : user) {
    if (!is_header(st)) continue;
    if (st.directive == ".version" && runtime_version > user_version) {
      ptx += "\n.version " + std::to_string(runtime_version / 100) + "." + std::to_string(runtime_version % 100) + "\n";
      continue;
    }
    ptx += st.text;
  }
  ptx += "\n// ---- gpualloc runtime ----\n";
  for (const ptx::statement& st : runtime) {
    if (is_header(st)) continue;
    if (!checked_heap && is_checked_only(st)) ptx += with_trap_body(st.text);
    else ptx += st.text;
  }
  ptx += "\n// ---- the module ----\n";
  ptx::entry_inliner inliner(runtime);
  for (const ptx::statement& st : user) {
    if (is_header(st)) continue;
    if (st.link == ptx::linkage::external && runtime_defines.count(st.name)) continue;
    // A weak definition the runtime has too (the heap and ABI globals of a
    // pinned part): one copy, the runtime's, which comes first.
    if (defines(st) && st.link == ptx::linkage::weak && runtime_defines.count(st.name)) continue;
    if (defines(st) && runtime_defines.count(st.name)) {
      return {{}, "the module defines " + std::string(st.name) + ", which the runtime defines too"};
    }
    ptx += st.is_function && st.has_body ? inliner.inline_calls(st.text) : std::string(st.text);
  }
  ptx += '\n';
  // The runtime's fences, in its functions and where the module inlined
  // them, one-way where the module's GPU has them (abi.h).
  if (user_sm >= abi::one_way_fence_sm && std::max(user_version, runtime_version) >= abi::one_way_fence_ptx_version) {
    replace_all(ptx, abi::release_fence_asm, abi::release_fence_sm90);
    replace_all(ptx, abi::acquire_fence_asm, abi::acquire_fence_sm90);
  }
  return out;
}

}  // namespace gpualloc
