#include "ptx_text.h"

#include <cctype>
#include <cstddef>

namespace gpualloc::ptx {
namespace {

bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%' || c == '.'; }

// Skips whitespace and comments from `i`; returns the new position.
std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size()) {
    if (std::isspace(static_cast<unsigned char>(s[i]))) {
      ++i;
    } else if (s.compare(i, 2, "//") == 0) {
      const std::size_t end = s.find('\n', i);
      i = end == std::string_view::npos ? s.size() : end + 1;
    } else if (s.compare(i, 2, "/*") == 0) {
      const std::size_t end = s.find("*/", i + 2);
      i = end == std::string_view::npos ? s.size() : end + 2;
    } else {
      break;
    }
  }
  return i;
}

// The end of the statement that starts at `i` (the first character after it).
std::size_t statement_end(std::string_view s, std::size_t i, std::string_view directive) {
  if (directive == ".version" || directive == ".target" || directive == ".address_size" || directive == ".file") {
    const std::size_t end = s.find('\n', i);
    return end == std::string_view::npos ? s.size() : end + 1;
  }
  int depth = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
      ++i;
    } else if (s.compare(i, 2, "//") == 0 || s.compare(i, 2, "/*") == 0) {
      i = skip_space(s, i);
    } else if (c == '{') {
      ++depth, ++i;
    } else if (c == '}') {
      ++i;
      if (--depth == 0) {
        // A body ends the statement; an initialiser ({...};) goes on to its ';'.
        const std::size_t next = skip_space(s, i);
        if (next >= s.size() || s[next] != ';') return i;
      }
    } else if (c == ';' && depth == 0) {
      return i + 1;
    } else {
      ++i;
    }
  }
  return s.size();
}

// Reads the next word (a directive or identifier) at or after `i`.
std::string_view word_at(std::string_view s, std::size_t& i) {
  i = skip_space(s, i);
  const std::size_t begin = i;
  while (i < s.size() && is_identifier_char(s[i])) ++i;
  return s.substr(begin, i - begin);
}

// Fills in directive, linkage and name of a statement whose code starts at `code`.
void classify(statement& st, std::string_view s, std::size_t code, std::size_t end) {
  std::size_t i = code;
  std::string_view w = word_at(s, i);
  for (;;) {
    if (w == ".visible") st.link = linkage::visible;
    else if (w == ".extern") st.link = linkage::external;
    else if (w == ".weak") st.link = linkage::weak;
    else if (w == ".common") st.link = linkage::common;
    else break;
    w = word_at(s, i);
  }
  st.directive = w;
  if (w == ".func" || w == ".entry") {
    st.is_function = true;
    i = skip_space(s, i);
    if (i < end && s[i] == '(') {  // the return parameter list
      int depth = 0;
      for (; i < end; ++i) {
        if (s[i] == '(') ++depth;
        if (s[i] == ')' && --depth == 0) {
          ++i;
          break;
        }
      }
    }
    st.name = word_at(s, i);
    st.has_body = s.substr(code, end - code).find('{') != std::string_view::npos;
    return;
  }
  if (w == ".global" || w == ".shared" || w == ".const" || w == ".local") {
    // The name is the last word before '[', '=' or ';'.
    std::string_view last;
    while (i < end) {
      i = skip_space(s, i);
      if (i >= end || s[i] == '[' || s[i] == '=' || s[i] == ';') break;
      std::string_view next = word_at(s, i);
      if (next.empty()) {
        ++i;
        continue;
      }
      last = next;
    }
    st.name = last;
  }
}

}  // namespace

std::vector<statement> split(std::string_view s) {
  std::vector<statement> out;
  std::size_t begin = 0;
  while (begin < s.size()) {
    const std::size_t code = skip_space(s, begin);
    if (code >= s.size()) {
      out.push_back(statement{s.substr(begin)});
      break;
    }
    std::size_t probe = code;
    std::string_view first = word_at(s, probe);
    std::string_view directive = first;
    while (directive == ".visible" || directive == ".extern" || directive == ".weak" || directive == ".common")
      directive = word_at(s, probe);
    const std::size_t end = statement_end(s, code, directive);
    statement st{s.substr(begin, end - begin)};
    classify(st, s, code, end);
    out.push_back(st);
    begin = end;
  }
  return out;
}

int version_number(std::string_view text) {
  const std::size_t at = text.find(".version");
  if (at == std::string_view::npos) return -1;
  std::size_t i = at + 8;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  int major = 0, minor = 0;
  bool any = false;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) major = major * 10 + (text[i] - '0'), any = true;
  if (!any || i >= text.size() || text[i] != '.') return -1;
  for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) minor = minor * 10 + (text[i] - '0');
  return major * 100 + minor;
}

int target_sm(std::string_view text) {
  const std::size_t at = text.find(".target");
  if (at == std::string_view::npos) return -1;
  const std::size_t sm = text.find("sm_", at);
  if (sm == std::string_view::npos) return -1;
  int number = 0;
  bool any = false;
  for (std::size_t i = sm + 3; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
    number = number * 10 + (text[i] - '0'), any = true;
  return any ? number : -1;
}

}  // namespace gpualloc::ptx
