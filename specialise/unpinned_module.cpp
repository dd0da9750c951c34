#include "unpinned_module.h"

#include <cstdio>
#include <cstdlib>
#include <cstdint>

#include "gpualloc/abi.h"
#include "ptx_text.h"

namespace gpualloc {
namespace {

constexpr std::string_view blob_tag = "// gpualloc unpinned module:";

bool is_entry_declaration(const ptx::statement& st) {
  return st.is_function && st.link == ptx::linkage::external && !st.has_body && abi::is_entry_point(st.name);
}

// The declaration's text without leading comments, .extern and the final ';'.
std::string prototype(std::string_view text) {
  std::string_view code = text.substr(text.find(".extern") + 7);
  const std::size_t semicolon = code.rfind(';');
  return std::string(code.substr(0, semicolon));
}

std::string byte_list(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 4);
  char number[8];
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(number, sizeof number, i == 0 ? "%u" : ",%u", static_cast<unsigned char>(bytes[i]));
    out += number;
    if (i % 32 == 31) out += '\n';
  }
  return out;
}

constexpr std::string_view stub_message =
    "gpualloc: this module was compiled by gpualloc-clang++ for a strategy chosen at run time, but libgpualloc did "
    "not specialise it: link with gpualloc-clang++ or LD_PRELOAD libgpualloc.so\n";

// A weak definition for an entry point's prototype: print once per lane, trap.
std::string stub(const std::string& proto) {
  return ".weak" + proto + "\n{\n\t.reg .b64 %gpa<3>;\n\t.reg .b32 %gpb<2>;\n\tmov.u64 %gpa1, __gpualloc_stub_message;\n"
         "\tcvta.global.u64 %gpa2, %gpa1;\n\t{\n\t.param .b64 gpa_p0;\n\tst.param.b64 [gpa_p0], %gpa2;\n"
         "\t.param .b64 gpa_p1;\n\tst.param.b64 [gpa_p1], 0;\n\t.param .b32 gpa_r;\n"
         "\tcall.uni (gpa_r), vprintf, (gpa_p0, gpa_p1);\n\tld.param.b32 %gpb1, [gpa_r];\n\t}\n\ttrap;\n\tret;\n}\n";
}

int number_after(std::string_view line, std::string_view key) {
  const std::size_t at = line.find(key);
  return at == std::string_view::npos ? -1 : std::atoi(std::string(line.substr(at + key.size(), 12)).c_str());
}

}  // namespace

bool calls_runtime_entry_points(std::string_view ptx) {
  if (ptx.find("__gpualloc_") == std::string_view::npos) return false;
  for (const ptx::statement& st : ptx::split(ptx))
    if (is_entry_declaration(st)) return true;
  return false;
}

std::string carry(std::string_view ptx, const jit_settings& s) {
  char header[160];
  std::snprintf(header, sizeof header, "%.*s abi=%u opt=%d maxrreg=%d debug=%d lineinfo=%d\n", int(blob_tag.size()),
                blob_tag.data(), abi::version, s.optimization, s.max_registers, s.debug ? 1 : 0, s.line_info ? 1 : 0);
  const std::string blob = std::string(header) + std::string(ptx);

  std::string out;
  out.reserve(ptx.size() + blob.size() * 4 + 4096);
  bool stubs_declared = false;
  for (const ptx::statement& st : ptx::split(ptx)) {
    if (!is_entry_declaration(st)) {
      out += st.text;
      continue;
    }
    if (!stubs_declared) {
      out += "\n.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);\n";
      out += ".global .align 1 .b8 __gpualloc_stub_message[" + std::to_string(stub_message.size() + 1) + "] = {" +
             byte_list(std::string(stub_message) + '\0') + "};\n";
      stubs_declared = true;
    }
    out += '\n' + stub(prototype(st.text));
  }
  out += "\n// The module's own PTX, for libgpualloc (gpualloc/abi.h).\n";
  out += ".visible .global .align 1 .b8 " + std::string(abi::ptx_blob) + "[" + std::to_string(blob.size()) + "] = {" +
         byte_list(blob) + "};\n";
  return out;
}

std::optional<unpinned_module> read_blob(std::string_view blob) {
  if (blob.substr(0, blob_tag.size()) != blob_tag) return std::nullopt;
  const std::size_t newline = blob.find('\n');
  if (newline == std::string_view::npos) return std::nullopt;
  const std::string_view line = blob.substr(0, newline);
  unpinned_module m;
  m.abi = static_cast<std::uint32_t>(number_after(line, "abi="));
  m.settings.optimization = number_after(line, "opt=");
  m.settings.max_registers = number_after(line, "maxrreg=");
  m.settings.debug = number_after(line, "debug=") == 1;
  m.settings.line_info = number_after(line, "lineinfo=") == 1;
  m.ptx = blob.substr(newline + 1);
  // The global holds the text without a terminating NUL; drop one if present.
  while (!m.ptx.empty() && m.ptx.back() == '\0') m.ptx.remove_suffix(1);
  return m;
}

}  // namespace gpualloc
