#include "core/io/recipe_edit.hpp"

#include <fmt/format.h>

#include <map>
#include <sstream>
#include <vector>

#include "core/io/recipe.hpp"

namespace distrain {

namespace {

// One key to set (text) or delete (nullopt) in the table at a dotted path ("" the root).
struct KeyEdit {
  std::string key;
  std::optional<std::string> text;
};
using Edits = std::map<std::string, std::vector<KeyEdit>>;

bool same_scalar(const toml::node& x, const toml::node& y) {
  switch (x.type()) {
    case toml::node_type::string: return x.as_string()->get() == y.as_string()->get();
    case toml::node_type::integer: return x.as_integer()->get() == y.as_integer()->get();
    case toml::node_type::floating_point: return x.as_floating_point()->get() == y.as_floating_point()->get();
    case toml::node_type::boolean: return x.as_boolean()->get() == y.as_boolean()->get();
    default: return toml_value_text(x) == toml_value_text(y);  // dates and times, by their text
  }
}

bool same(const toml::node& x, const toml::node& y) {
  if (x.type() != y.type()) return false;
  if (const toml::table* t = x.as_table()) return *t == *y.as_table();
  if (const toml::array* a = x.as_array()) return *a == *y.as_array();
  return same_scalar(x, y);
}

// The edits that turn table `a` (at `path`) into `b`; false where one cannot be made.
bool collect_edits(const toml::table& a, const toml::table& b, const std::string& path, Edits& edits) {
  for (const auto& [k, node] : b) {
    const std::string key(k.str());
    const toml::node* old = a.get(key);
    if (old && same(*old, node)) continue;
    if (const toml::table* sub = node.as_table()) {
      if (old && !old->is_table()) return false;
      if (!collect_edits(old ? *old->as_table() : toml::table{}, *sub, path + key + ".", edits)) return false;
      continue;
    }
    const std::optional<std::string> text = toml_value_text(node);
    if (!text || (old && old->is_table())) return false;
    edits[path].push_back({key, text});
  }
  for (const auto& [k, node] : a) {
    if (b.contains(k.str())) continue;
    if (node.is_table()) return false;
    edits[path].push_back({std::string(k.str()), std::nullopt});
  }
  return true;
}

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The table path of a [header] line ("a.b." with its trailing dot), "[[" for an array of
// tables (never edited); nullopt for any other line.
std::optional<std::string> header_path(const std::string& line) {
  const std::string t = trim(line);
  if (t.rfind("[[", 0) == 0) return std::string("[[");
  if (t.empty() || t[0] != '[') return std::nullopt;
  const size_t close = t.find(']');
  if (close == std::string::npos) return std::nullopt;
  std::string path;
  std::stringstream parts(t.substr(1, close - 1));
  for (std::string part; std::getline(parts, part, '.');) path += trim(part) + ".";
  return path;
}

// The bare key of a `key = value` line ("" for any other line).
std::string line_key(const std::string& line) {
  const std::string t = trim(line);
  size_t i = 0;
  while (i < t.size() && (std::isalnum(static_cast<unsigned char>(t[i])) || t[i] == '_' || t[i] == '-')) ++i;
  const size_t eq = t.find_first_not_of(" \t", i);
  return i > 0 && eq != std::string::npos && t[eq] == '=' ? t.substr(0, i) : "";
}

// Where the value of the key on lines[first] ends: the last line it takes and the column
// of what follows it there (spaces and a comment); nullopt for a multi-line string.
std::optional<std::pair<size_t, size_t>> value_end(const std::vector<std::string>& lines, size_t first) {
  int depth = 0;
  char quote = 0;
  for (size_t l = first; l < lines.size(); ++l) {
    const std::string& s = lines[l];
    for (size_t c = l == first ? s.find('=') + 1 : 0; c < s.size(); ++c) {
      const char ch = s[c];
      if (quote) {
        if (ch == '\\' && quote == '"') ++c;
        else if (ch == quote) quote = 0;
        continue;
      }
      if ((ch == '"' || ch == '\'') && s.compare(c, 3, std::string(3, ch)) == 0) return std::nullopt;
      if (ch == '"' || ch == '\'') quote = ch;
      else if (ch == '[' || ch == '{') ++depth;
      else if (ch == ']' || ch == '}') --depth;
      else if (ch == '#') {
        if (depth > 0) break;  // a comment inside a multi-line array: the value goes on
        size_t end = c;
        while (end > 0 && (s[end - 1] == ' ' || s[end - 1] == '\t')) --end;
        return std::pair{l, end};
      }
    }
    if (depth <= 0 && !quote) return std::pair{l, trim(s).empty() ? s.size() : s.find_last_not_of(" \t\r") + 1};
  }
  return std::nullopt;
}

// Where a key's `key = value` lies: its first line, its last, and the column after the value
// on the last (where spaces and a comment follow).
struct KeySpan {
  size_t first, last, tail;
};

// The text's lines with `edits` made.
std::optional<std::string> apply_edits(const std::vector<std::string>& lines, const Edits& edits) {
  // Each table's lines: its header (or none for the root) and where its last key ends.
  std::map<std::string, size_t> last_line_of;  // path -> the line after which a new key goes
  std::map<std::string, std::map<std::string, KeySpan>> key_span;
  std::string path;
  bool first_header_seen = false;
  size_t root_insert = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (const auto header = header_path(lines[i])) {
      path = *header;
      last_line_of[path] = i;
      first_header_seen = true;
      continue;
    }
    const std::string key = line_key(lines[i]);
    if (key.empty()) continue;
    const auto end = value_end(lines, i);
    if (!end) return std::nullopt;
    key_span[path][key] = KeySpan{i, end->first, end->second};
    last_line_of[path] = end->first;
    if (!first_header_seen) root_insert = end->first + 1;
    i = end->first;
  }
  std::map<size_t, std::string> replaced;
  std::map<size_t, std::vector<std::string>> inserted_after;
  std::vector<std::string> root_added, new_table_order;
  std::map<std::string, std::vector<std::string>> new_tables;  // tables the text lacks: their keys
  std::vector<bool> removed(lines.size(), false);
  for (const auto& [table, keys] : edits) {
    for (const KeyEdit& e : keys) {
      const auto found = key_span[table].find(e.key);
      if (found != key_span[table].end()) {
        const KeySpan& span = found->second;
        for (size_t l = span.first; l <= span.last; ++l) removed[l] = true;
        if (!e.text) continue;
        const std::string& line = lines[span.first];
        replaced[span.first] = line.substr(0, line.find('=') + 1) + " " + *e.text + lines[span.last].substr(span.tail);
        removed[span.first] = false;
        continue;
      }
      if (!e.text) continue;
      const std::string line = e.key + " = " + *e.text;
      if (table.empty()) root_added.push_back(line);
      else if (const auto section = last_line_of.find(table); section != last_line_of.end())
        inserted_after[section->second].push_back(line);
      else {
        if (new_tables.find(table) == new_tables.end()) new_table_order.push_back(table);
        new_tables[table].push_back(line);
      }
    }
  }
  std::string out;
  for (size_t i = 0; i <= lines.size(); ++i) {
    if (i == root_insert)
      for (const std::string& l : root_added) out += l + "\n";
    if (i == lines.size()) break;
    if (const auto r = replaced.find(i); r != replaced.end()) out += r->second + "\n";
    else if (!removed[i]) out += lines[i] + "\n";
    if (const auto ins = inserted_after.find(i); ins != inserted_after.end())
      for (const std::string& l : ins->second) out += l + "\n";
  }
  for (const std::string& table : new_table_order) {
    out += "\n[" + table.substr(0, table.size() - 1) + "]\n";
    for (const std::string& l : new_tables[table]) out += l + "\n";
  }
  return out;
}

}  // namespace

std::optional<std::string> toml_value_text(const toml::node& value) {
  if (const auto* s = value.as_string()) return toml_quoted(s->get());
  if (const auto* i = value.as_integer()) return std::to_string(i->get());
  if (const auto* b = value.as_boolean()) return std::string(b->get() ? "true" : "false");
  if (const auto* f = value.as_floating_point()) {
    std::string text = fmt::format("{}", f->get());  // the shortest that reads back as the same double
    if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // "3" would read as an integer; inf, nan stay
    return text;
  }
  if (const auto* a = value.as_array()) {
    std::string text = "[";
    for (size_t i = 0; i < a->size(); ++i) {
      const std::optional<std::string> item = toml_value_text((*a)[i]);
      if (!item) return std::nullopt;
      text += (i ? ", " : "") + *item;
    }
    return text + "]";
  }
  if (value.is_table()) return std::nullopt;
  std::ostringstream out;  // a date or a time
  value.visit([&out](const auto& v) { out << v; });
  return out.str();
}

std::optional<std::string> edit_recipe_text(const std::string& text, const toml::table& target) {
  toml::table original;
  try {
    original = toml::parse(text);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
  Edits edits;
  if (!collect_edits(original, target, "", edits)) return std::nullopt;
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::optional<std::string> edited = apply_edits(lines, edits);
  if (!edited) return std::nullopt;
  try {
    if (toml::parse(*edited) != target) return std::nullopt;
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
  return edited;
}

std::optional<std::string> edit_layout_text(const std::string& text, const toml::table& target, bool model_changed) {
  toml::table kept = target;
  try {
    const toml::table written = toml::parse(text);
    if (const toml::node* model = written.get("model"); model && !model_changed) kept.insert_or_assign("model", *model);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
  return edit_recipe_text(text, kept);
}

}  // namespace distrain
