// PTX text as a sequence of top-level statements: just enough of PTX's
// syntax to join two modules and to add definitions to one (specialise/).
//
// A statement is a directive at module scope: a header line (.version,
// .target, .address_size, .file), a declaration or definition of a
// variable or function, or a .section block. Comments and whitespace before
// a statement belong to it, so the statements' texts concatenated give the
// module back unchanged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpualloc::ptx {

enum class linkage { local, visible, external, weak, common };

struct statement {
  std::string_view text;   // the whole statement, leading comments and whitespace included
  std::string_view directive;  // its first directive after the linkage: ".version", ".func", ".global", ...
  std::string_view name;   // the symbol a declaration or definition names; empty for others
  linkage link = linkage::local;
  bool is_function = false;  // .func or .entry
  bool has_body = false;     // a function definition ({...}) rather than a prototype
};

// Splits `module` (which must outlive the result) into statements. The text
// after the last statement, if any, is returned as a statement with an empty
// directive.
std::vector<statement> split(std::string_view module);

// "8.8" of `.version 8.8` as 8 * 100 + 8, or -1.
int version_number(std::string_view version_directive_text);

// 90 of `.target sm_90a` (the first sm_ name of the directive), or -1.
int target_sm(std::string_view target_directive_text);

}  // namespace gpualloc::ptx
