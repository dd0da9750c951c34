// Inlines the runtime's entry points into the user's functions when a module
// is joined (join.h), as a pinned build's LLVM inliner does: every entry
// point but check_read, which stays out of line there too.
//
// Why: ptxas keeps a call of a .func as a call, and around each call it
// saves and clears the caller's convergence barriers. A call in a divergent
// branch of a loop then leaves the warp split for the rest of the loop
// (README, "What the join costs at run time"). Inlined, the allocator runs
// as in a pinned build; its rare paths stay calls, as they do there.
//
// A call site, as LLVM's NVPTX back end writes it:
//
//     { // callseq 1, 0
//     .param .b64 param0;
//     .param .b64 retval0;
//     st.param.b64 [param0], %rd8;
//     call.uni (retval0), __gpualloc_malloc, (param0);
//     ld.param.b64 %rd25, [retval0];
//     } // callseq 1
//
// becomes a block that holds a copy of the callee's body, in which
//   - the callee's registers and labels carry a prefix unique to the copy
//     (__gpualloc_i<N>_), so no name meets the caller's or another copy's;
//   - its stack frame (LLVM's __local_depot<N>) is one local array of the
//     user's function, shared by the copies in it and as large as the
//     largest: a thread runs one copy at a time, and a frame is written
//     before it is read in every call, so frames need not add up;
//   - a load of parameter k is a mov of the value the call site stored to
//     its parameter k;
//   - the store of the return value is a mov to the register the call site
//     loaded it into (dropped when the result is unused);
//   - each ret is a branch to a label at the end of the block.
//
// Any other shape of call site or callee (aggregate parameters, a
// parameter read at an offset, operands of other widths) stays a call:
// inlining changes speed, never meaning.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptx_text.h"

namespace gpualloc::ptx {

class entry_inliner {
 public:
  // Finds the definitions of the entry points to inline in `runtime`
  // (whose text must outlive the inliner).
  explicit entry_inliner(const std::vector<statement>& runtime);

  // `function` (a definition from the user's module) with its calls of the
  // entry points replaced by copies of their bodies.
  std::string inline_calls(std::string_view function);

 private:
  // A line of a callee's body as every copy writes it: its pattern has
  // markers where a copy puts its prefix, an argument or the caller's
  // result register (inline_entries.cpp).
  struct body_line {
    enum kind { copied, param_load, return_store, ret };
    kind what = copied;
    std::string pattern;
    std::size_t param = 0;  // param_load: which parameter
    int bits = 0;           // param_load: the width it is read with
  };
  struct callee {
    std::vector<std::string_view> params;  // parameter names, in order
    int return_bits = 0;                   // width of func_retval0; 0: returns nothing
    std::vector<body_line> body;           // the body between its braces, without its frame's declaration
    int frame_bytes = 0, frame_align = 1;  // its stack frame (a local array), if any
  };

  // Reads a callee's definition; false for shapes not handled here.
  static bool parse(std::string_view definition, callee& out);
  // Whether the call site `block` ({...}) could be inlined; if so, appends its copy to `out`.
  bool inline_block(std::string_view block, std::string& out);

  std::map<std::string_view, std::string_view> definitions_;  // entry point -> its definition in the runtime
  std::map<std::string_view, std::optional<callee>> callees_;  // read when first called; nothing: not inlinable
  int copies_ = 0;  // copies made so far: the next copy's prefix
  int frame_bytes_ = 0, frame_align_ = 1;  // the frame the copies in the current function share
};

}  // namespace gpualloc::ptx
