#include "inline_entries.h"

#include <cctype>
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <set>

#include "gpualloc/abi.h"

namespace gpualloc::ptx {
namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The code of a line: without its comment and surrounding space.
std::string_view code_of(std::string_view line) {
  const std::size_t comment = line.find("//");
  return trim(comment == std::string_view::npos ? line : line.substr(0, comment));
}

// The next whitespace- or comma-separated word of `s`, consumed.
std::string_view next_word(std::string_view& s) {
  s = trim(s);
  std::size_t end = 0;
  while (end < s.size() && !is_space(s[end]) && s[end] != ',') ++end;
  std::string_view word = s.substr(0, end);
  s.remove_prefix(end);
  s = trim(s);
  if (!s.empty() && s.front() == ',') s.remove_prefix(1);
  return word;
}

// The width of a parameter's type (".b64", ".u32"); 0 for types a mov cannot move
// (8-bit, predicates, anything else).
int bits_of(std::string_view type) {
  if (type.size() < 3 || type[0] != '.' || (type[1] != 'b' && type[1] != 'u' && type[1] != 's')) return 0;
  const std::string_view width = type.substr(2);
  return width == "16" ? 16 : width == "32" ? 32 : width == "64" ? 64 : 0;
}

// "[name]" as name; empty if `s` is not that.
std::string_view bracketed(std::string_view s) {
  s = trim(s);
  if (s.size() < 3 || s.front() != '[' || s.back() != ']') return {};
  return trim(s.substr(1, s.size() - 2));
}

// `ld.param.T dst, [src]` or `st.param.T [dst], src` (without the ';'), split.
struct param_move {
  std::string_view type, to, from;
};
std::optional<param_move> read_param_move(std::string_view code, std::string_view opcode) {
  if (!code.starts_with(opcode) || code.size() <= opcode.size() || code[opcode.size()] != '.') return {};
  std::string_view rest = code.substr(opcode.size());
  param_move m;
  m.type = next_word(rest);
  m.to = next_word(rest);
  m.from = trim(rest);
  if (m.from.ends_with(";")) m.from = trim(m.from.substr(0, m.from.size() - 1));
  if (bits_of(m.type) == 0 || m.to.empty() || m.from.empty() || m.from.find(',') != std::string_view::npos) return {};
  return m;
}

// The position of the '}' that closes the '{' at `open`, skipping comments and strings.
std::size_t matching_brace(std::string_view s, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    if (s.compare(i, 2, "//") == 0) {
      i = s.find('\n', i);
      if (i == std::string_view::npos) return i;
    } else if (s[i] == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
    } else if (s[i] == '{') {
      ++depth;
    } else if (s[i] == '}' && --depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

// A character that may open or close a block, a comment or a string.
bool is_block_syntax(char c) { return c == '{' || c == '}' || c == '/' || c == '"'; }

// Calls `each(word)` for every name in `code` (registers with their '%').
template <class Each>
void for_each_name(std::string_view code, Each each) {
  for (std::size_t i = 0; i < code.size();) {
    if (is_name_start(code[i])) {
      const std::size_t begin = i++;
      while (i < code.size() && is_name_char(code[i])) ++i;
      each(code.substr(begin, i - begin));
    } else {
      ++i;
    }
  }
}

// The local array that holds the frames of the copies in one user function.
constexpr std::string_view shared_frame = "__gpualloc_inlined_frame";

// Markers in a body line's pattern, filled in by each copy.
constexpr char prefix_marker = '\x01';    // the copy's prefix
constexpr char argument_marker = '\x02';  // followed by k: the value stored to parameter k
constexpr char result_marker = '\x03';    // the register the call site loads the result into
bool is_marker(char c) { return c == prefix_marker || c == argument_marker || c == result_marker; }

// What a callee declares: its names get the copy's prefix.
struct own_names {
  std::set<std::string_view> names;            // registers ("SP" of %SP, "rd" of %rd<168>), labels
  std::set<std::string_view> register_ranges;  // "rd" of %rd<168>: %rd0, %rd1, ... are its own too
  std::string_view frame;                      // its frame's local array: the shared one in a copy
};

// `text` with the callee's own names marked for the copy's prefix.
std::string pattern_of(std::string_view text, const own_names& own) {
  std::string out;
  out.reserve(text.size() + 16);
  for (std::size_t i = 0; i < text.size();) {
    const char ch = text[i];
    if (text.compare(i, 2, "//") == 0) {
      out += text.substr(i);
      break;
    }
    if (ch == '"') {
      std::size_t end = i + 1;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, text.size());
      out += text.substr(i, end - i);
      i = end;
      continue;
    }
    if (!is_name_start(ch) && !is_digit(ch)) {
      out += ch;
      ++i;
      continue;
    }
    // A name, or a number (0f3F800000 is not a name).
    const std::size_t begin = i++;
    while (i < text.size() && is_name_char(text[i])) ++i;
    const std::string_view word = text.substr(begin, i - begin);
    if (is_digit(ch)) {
      out += word;
    } else if (ch == '%') {
      const std::string_view name = word.substr(1);
      std::size_t digits = name.size();
      while (digits > 0 && is_digit(name[digits - 1])) --digits;
      const bool mine = own.names.count(name) != 0 ||
                        (digits < name.size() && own.register_ranges.count(name.substr(0, digits)) != 0);
      if (mine) (out += '%') += prefix_marker;
      out += mine ? name : word;
    } else if (word == own.frame) {
      out += shared_frame;
    } else {
      if (own.names.count(word) != 0) out += prefix_marker;
      out += word;
    }
  }
  return out;
}

}  // namespace

entry_inliner::entry_inliner(const std::vector<statement>& runtime) {
  for (const statement& st : runtime) {
    if (st.is_function && st.has_body && abi::is_entry_point(st.name) && st.name != abi::check_read_entry)
      definitions_.emplace(st.name, st.text);
  }
}

// Reads `.func (.param .bN func_retval0) name(.param .bN p0, ...) { body }`.
bool entry_inliner::parse(std::string_view definition, callee& c) {
  std::size_t at = definition.find(".func");
  if (at == std::string_view::npos) return false;
  std::string_view rest = trim(definition.substr(at + 5));
  if (rest.starts_with("(")) {
    const std::size_t close = rest.find(')');
    if (close == std::string_view::npos) return false;
    std::string_view ret = rest.substr(1, close - 1);
    if (next_word(ret) != ".param") return false;
    c.return_bits = bits_of(next_word(ret));
    if (c.return_bits == 0 || next_word(ret) != "func_retval0" || !trim(ret).empty()) return false;
    rest = trim(rest.substr(close + 1));
  }
  const std::size_t open_params = rest.find('('), close_params = rest.find(')');
  if (open_params == std::string_view::npos || close_params == std::string_view::npos) return false;
  std::string_view params = rest.substr(open_params + 1, close_params - open_params - 1);
  while (!trim(params).empty()) {
    const std::size_t comma = params.find(',');
    std::string_view one = params.substr(0, comma);
    params = comma == std::string_view::npos ? std::string_view{} : params.substr(comma + 1);
    if (next_word(one) != ".param" || bits_of(next_word(one)) == 0) return false;  // no .align, no arrays
    const std::string_view name = next_word(one);
    if (name.empty() || !trim(one).empty()) return false;
    c.params.push_back(name);
  }
  // Nothing but comments and the body after the parameters (no .noreturn, no
  // performance directives).
  rest = rest.substr(close_params + 1);
  for (rest = trim(rest); rest.starts_with("//"); rest = trim(rest))
    rest.remove_prefix(std::min(rest.size(), rest.find('\n')));
  const std::size_t close_body = rest.rfind('}');
  if (!rest.starts_with("{") || close_body == std::string_view::npos) return false;
  std::string_view body = rest.substr(1, close_body - 1);

  auto param_index = [&](std::string_view name) -> std::optional<std::size_t> {
    for (std::size_t k = 0; k < c.params.size(); ++k)
      if (c.params[k] == name) return k;
    return {};
  };
  // First read every line (labels may be used before they are defined), then
  // write the patterns.
  struct read_line {
    body_line::kind what = body_line::copied;
    std::string_view text;     // the line
    std::string_view guard;    // ret: its predicate ("@%p3"), or empty
    std::string_view type;     // param_load, return_store: the operand's type (".b64")
    std::string_view operand;  // param_load: the register loaded; return_store: the value stored
    std::size_t param = 0;     // param_load: which parameter
    bool frame_declaration = false;
  };
  std::vector<read_line> lines;
  own_names own;
  while (!body.empty()) {
    const std::size_t eol = body.find('\n');
    const std::string_view text = body.substr(0, eol);
    body = eol == std::string_view::npos ? std::string_view{} : body.substr(eol + 1);
    const std::string_view code = code_of(text);
    read_line line{body_line::copied, text};

    // The names it declares: registers, its frame, labels.
    if (code.starts_with(".reg")) {
      std::string_view decl = code.substr(0, code.find(';'));
      next_word(decl);
      next_word(decl);  // .reg .type
      while (!trim(decl).empty()) {
        std::string_view name = next_word(decl);
        if (name.starts_with("%")) name.remove_prefix(1);
        const std::size_t range = name.find('<');
        if (range != std::string_view::npos) own.register_ranges.insert(name.substr(0, range));
        own.names.insert(name.substr(0, range));
      }
    } else if (code.starts_with(".local")) {  // .local .align A .b8 name[bytes];
      std::string_view decl = code;
      next_word(decl);
      if (!own.frame.empty() || next_word(decl) != ".align") return false;
      c.frame_align = std::atoi(std::string(next_word(decl)).c_str());
      if (next_word(decl) != ".b8") return false;
      const std::size_t open = decl.find('[');
      own.frame = trim(decl.substr(0, open));
      c.frame_bytes = open == std::string_view::npos ? 0 : std::atoi(std::string(decl.substr(open + 1)).c_str());
      if (c.frame_bytes <= 0 || c.frame_align <= 0 || !decl.ends_with("];")) return false;
      line.frame_declaration = true;
    } else if (code.starts_with(".shared") || code.starts_with(".const") || code.starts_with(".global")) {
      return false;  // a variable a copy would duplicate
    } else if (const std::string_view label = code.substr(0, code.find(':')); label.size() < code.size() &&
               !label.empty() && is_name_start(label[0]) &&
               std::all_of(label.begin() + 1, label.end(), is_name_char)) {
      own.names.insert(label);  // a label, also one with a directive after it ($L_brx_0: .branchtargets ...)
    }

    // The instructions that become movs or branches.
    std::string_view instruction = code;
    std::string_view guard;
    if (instruction.starts_with("@")) guard = next_word(instruction);
    if (instruction == "ret;" || instruction == "ret.uni;") {
      line.what = body_line::ret;
      line.guard = guard;
    } else if (auto load = read_param_move(code, "ld.param")) {
      // A parameter of this function, or a result in a call sequence of its own.
      if (const std::optional<std::size_t> k = param_index(bracketed(load->from))) {
        if (!load->to.starts_with("%")) return false;
        line = read_line{body_line::param_load, text, {}, load->type, load->to, *k};
      }
    } else if (auto store = read_param_move(code, "st.param")) {
      if (bracketed(store->to) == "func_retval0") {
        if (!guard.empty() || bits_of(store->type) != c.return_bits) return false;
        line = read_line{body_line::return_store, text, {}, store->type, store->from};
      }
    }
    if (line.what == body_line::copied && !line.frame_declaration) {
      // Every other use of a parameter or of the return value is a shape not handled here.
      bool other_use = false;
      for_each_name(code, [&](std::string_view name) { other_use |= name == "func_retval0" || param_index(name); });
      if (other_use) return false;
    } else if (!guard.empty() && line.what != body_line::ret) {
      return false;
    }
    lines.push_back(line);
  }
  // The return value is stored just before a ret: in a copy, the caller's
  // register takes it when no parameter can be read any more (an argument
  // may be held in that same register).
  bool pending_store = false;
  for (const read_line& line : lines) {
    if (pending_store && line.what != body_line::ret && !code_of(line.text).empty()) return false;
    if (pending_store && line.what == body_line::ret && !line.guard.empty()) return false;
    if (line.what == body_line::return_store) pending_store = true;
    if (line.what == body_line::ret) pending_store = false;
  }
  if (pending_store) return false;

  const std::string end_label = std::string(1, prefix_marker) + "return";
  for (const read_line& line : lines) {
    if (line.frame_declaration) continue;  // the function's shared frame instead
    body_line out{line.what};
    switch (line.what) {
      case body_line::copied:
        out.pattern = pattern_of(line.text, own);
        break;
      case body_line::param_load:
        out.pattern = "\tmov" + std::string(line.type) + " \t" + pattern_of(line.operand, own) + ", " + argument_marker +
                      static_cast<char>('0' + line.param) + ";";
        out.param = line.param;
        out.bits = bits_of(line.type);
        break;
      case body_line::return_store:
        out.pattern = "\tmov" + std::string(line.type) + " \t" + result_marker + ", " + pattern_of(line.operand, own) + ";";
        break;
      case body_line::ret:
        out.pattern = line.guard.empty() ? "\tbra.uni \t" + end_label + ";"
                                         : "\t" + pattern_of(line.guard, own) + " bra \t" + end_label + ";";
        break;
    }
    c.body.push_back(std::move(out));
  }
  return c.params.size() <= 10;  // one digit after an argument marker
}

std::string entry_inliner::inline_calls(std::string_view function) {
  std::string out;
  out.reserve(function.size());
  frame_bytes_ = 0, frame_align_ = 1;
  std::size_t body_start = std::string::npos;  // in `out`, just after the body's '{'
  int depth = 0;
  for (std::size_t i = 0; i < function.size();) {
    std::size_t next = i;
    while (next < function.size() && !is_block_syntax(function[next])) ++next;
    if (next > i) {  // nothing that opens or closes a block
      out += function.substr(i, next - i);
      i = next;
      continue;
    }
    const char ch = function[i];
    if (function.compare(i, 2, "//") == 0 || ch == '"') {  // a comment or a string: copied
      std::size_t end = function.find(ch == '"' ? '"' : '\n', i + 1);
      end = end == std::string_view::npos ? function.size() : end + (ch == '"');
      out += function.substr(i, end - i);
      i = end;
    } else if (ch == '{' && depth >= 1) {  // a block inside the body: a call site?
      const std::size_t close = matching_brace(function, i);
      if (close != std::string_view::npos && inline_block(function.substr(i, close - i + 1), out)) {
        i = close + 1;
      } else {
        out += ch;
        ++depth, ++i;
      }
    } else {
      depth += ch == '{' ? 1 : ch == '}' ? -1 : 0;
      out += ch;
      ++i;
      if (ch == '{' && depth == 1 && body_start == std::string::npos) body_start = out.size();
    }
  }
  if (frame_bytes_ > 0 && body_start != std::string::npos)
    out.insert(body_start, "\n\t.local .align " + std::to_string(frame_align_) + " .b8 \t" + std::string(shared_frame) +
                               "[" + std::to_string(frame_bytes_) + "];");
  return out;
}

bool entry_inliner::inline_block(std::string_view block, std::string& out) {
  if (block.find("call") == std::string_view::npos) return false;
  // The block's statements, without comments: parameter declarations, their
  // stores, one call, the result's load.
  std::string code;
  for (std::string_view rest = block.substr(1, block.size() - 2); !rest.empty();) {
    const std::size_t eol = rest.find('\n');
    code += code_of(rest.substr(0, eol));
    code += ' ';
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
  }
  struct value {
    int bits;
    std::string_view text;
  };
  std::map<std::string_view, value> stored;  // st.param [name], value
  std::optional<param_move> result;          // ld.param reg, [retval]
  std::string_view callee_name, return_param;
  std::vector<std::string_view> args;
  std::string_view statements = code;
  while (!trim(statements).empty()) {
    const std::size_t semicolon = statements.find(';');
    if (semicolon == std::string_view::npos) return false;
    std::string_view st = trim(statements.substr(0, semicolon));
    statements.remove_prefix(semicolon + 1);
    if (st.starts_with(".param")) {
      next_word(st);
      if (bits_of(next_word(st)) == 0) return false;
    } else if (auto store = read_param_move(st, "st.param")) {
      stored[bracketed(store->to)] = value{bits_of(store->type), store->from};
    } else if (auto load = read_param_move(st, "ld.param")) {
      if (result) return false;
      result = load;
    } else if (st.starts_with("call") && callee_name.empty()) {
      std::string_view opcode = next_word(st);
      if (opcode != "call" && opcode != "call.uni") return false;
      if (st.starts_with("(")) {
        const std::size_t close = st.find(')');
        if (close == std::string_view::npos) return false;
        return_param = trim(st.substr(1, close - 1));
        st = trim(st.substr(close + 1));
        if (!st.starts_with(",")) return false;
        st = trim(st.substr(1));
      }
      const std::size_t comma = st.find(',');
      callee_name = trim(st.substr(0, comma));
      std::string_view list = comma == std::string_view::npos ? std::string_view{"()"} : trim(st.substr(comma + 1));
      if (!list.starts_with("(") || !list.ends_with(")")) return false;
      list = list.substr(1, list.size() - 2);
      while (!trim(list).empty()) args.push_back(next_word(list));
    } else {
      return false;
    }
  }
  const auto definition = definitions_.find(callee_name);
  if (definition == definitions_.end()) return false;
  auto [known, first_call] = callees_.try_emplace(definition->first);
  if (first_call) {
    callee parsed;
    if (parse(definition->second, parsed)) known->second = std::move(parsed);
  }
  if (!known->second) return false;
  const callee& c = *known->second;
  if (args.size() != c.params.size()) return false;
  if (result && (c.return_bits == 0 || bracketed(result->from) != return_param ||
                 bits_of(result->type) != c.return_bits))
    return false;
  for (std::string_view arg : args)
    if (!stored.count(arg)) return false;
  for (const body_line& line : c.body)
    if (line.what == body_line::param_load && line.bits != stored[args[line.param]].bits) return false;

  frame_bytes_ = std::max(frame_bytes_, c.frame_bytes);
  frame_align_ = std::max(frame_align_, c.frame_align);
  const std::string prefix = "__gpualloc_i" + std::to_string(copies_++) + "_";
  out += "{ // gpualloc: " + std::string(callee_name) + " inlined\n";
  for (const body_line& line : c.body) {
    if (line.what == body_line::return_store && !result) continue;
    for (std::string_view rest = line.pattern; !rest.empty();) {
      std::size_t marker = 0;
      while (marker < rest.size() && !is_marker(rest[marker])) ++marker;
      out += rest.substr(0, marker);
      if (marker == rest.size()) break;
      if (rest[marker] == prefix_marker) out += prefix;
      if (rest[marker] == result_marker) out += result->to;
      if (rest[marker] == argument_marker) out += stored[args[rest[marker + 1] - '0']].text;
      rest.remove_prefix(marker + (rest[marker] == argument_marker ? 2 : 1));
    }
    out += '\n';
  }
  out += prefix + "return:\n\t}";
  return true;
}

}  // namespace gpualloc::ptx
