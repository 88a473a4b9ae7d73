// ConfigTable: typed, strict access to one TOML table of a recipe. Every error names the
// file, the line (where toml++ knows it) and the full key, says what was expected, and is
// a UserError. Keys nobody read are rejected by finish(), so a typo never passes silently.
#pragma once
#include <array>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <toml++/toml.h>
#include <vector>

namespace distrain {

class ConfigTable {
 public:
  // file: the recipe path; prefix: this table's dotted path with a trailing dot
  // ("strategy.", "model.layers[2].", or "" for the root).
  ConfigTable(const toml::table& table, std::string file, std::string prefix);

  bool has(const std::string& key) const { return table_.contains(key); }
  int64_t get_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt);
  double get_float(const std::string& key, std::optional<double> fallback = std::nullopt);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, std::optional<std::string> fallback = std::nullopt);
  std::string get_choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);
  // An int n (meaning [n, n]) or a two-element array [a, b].
  std::array<int64_t, 2> get_pair(const std::string& key, std::optional<std::array<int64_t, 2>> fallback = std::nullopt);
  std::vector<int64_t> get_int_list(const std::string& key, std::optional<std::vector<int64_t>> fallback = std::nullopt);
  // A string (one item) or an array of strings.
  std::vector<std::string> get_string_list(const std::string& key, std::vector<std::string> fallback);
  // A table whose keys are integers, e.g. { 256 = 0.1, 1024 = 0.4 }.
  std::map<int64_t, double> get_int_keyed_floats(const std::string& key);
  // A sub-table (empty when absent); marks the key as read.
  ConfigTable sub(const std::string& key);
  // The raw node (nullptr when absent); marks the key as read.
  const toml::node* raw(const std::string& key);

  // Throws if the table has keys that were never read.
  void finish() const;
  // "<file>:<line>" of the key (or the --set that gave it; the file alone without a line).
  std::string where(const std::string& key) const;
  // Throws UserError "<file>:<line>: <prefix><key>: <message>".
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  const std::string& file() const { return file_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const toml::node* lookup(const std::string& key);
  const toml::table& table_;
  std::string file_, prefix_;
  std::set<std::string> used_;
};

}  // namespace distrain
