#include "core/io/toml_depth.hpp"

#include "core/base/error.hpp"

namespace distrain {

namespace {

// Index just past the string that starts at text[i] (a quote), or text.size() if unclosed.
size_t skip_string(const std::string& text, size_t i) {
  const char quote = text[i];
  const bool multi_line = text.compare(i, 3, std::string(3, quote)) == 0;
  const std::string close = multi_line ? std::string(3, quote) : std::string(1, quote);
  for (size_t j = i + close.size(); j < text.size(); ++j) {
    if (quote == '"' && text[j] == '\\') {
      ++j;  // an escaped character, quotes included
      continue;
    }
    if (!multi_line && text[j] == '\n') return j;  // unterminated: the parser reports it
    if (text.compare(j, close.size(), close) == 0) return j + close.size();
  }
  return text.size();
}

}  // namespace

void check_toml_nesting(const std::string& text, const std::string& file) {
  int line = 1, brackets = 0, dots_in_key = 0;
  bool in_key = true;  // before the line's '=' (or on a [table] header line)
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      const size_t end = skip_string(text, i);
      for (size_t j = i; j < end; ++j) line += text[j] == '\n';
      i = end - 1;
      continue;
    }
    if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '\n') {
      ++line;
      dots_in_key = 0;
      in_key = brackets == 0;
      continue;
    }
    if (c == '=') in_key = false;
    if (c == '{' || c == ',') in_key = true;  // inline tables have keys too
    if (c == '.' && in_key) ++dots_in_key;
    if (c == '[' || c == '{') ++brackets;
    if ((c == ']' || c == '}') && brackets > 0) --brackets;
    DT_USER_CHECK(dots_in_key + brackets <= kMaxTomlNesting,
                  "{}:{}: keys or values nest deeper than {} levels; a recipe needs a handful", file, line,
                  kMaxTomlNesting);
  }
}

}  // namespace distrain
