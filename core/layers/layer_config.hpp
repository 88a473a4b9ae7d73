// LayerConfig: typed access to one [[model.layers]] table with errors that name the
// recipe file, the layer and the key. Keys nobody asked for are rejected by finish().
#pragma once
#include <array>
#include <optional>
#include <set>
#include <string>
#include <toml++/toml.h>
#include <vector>

namespace distrain {

class LayerConfig {
 public:
  // `where` prefixes every error, e.g. "recipes/cnn.toml: model.layers[2] (conv2d)".
  LayerConfig(const toml::table& table, std::string where);

  std::string type() const;
  std::optional<std::string> name();
  int64_t get_int(const std::string& key, std::optional<int64_t> fallback = std::nullopt);
  double get_float(const std::string& key, std::optional<double> fallback = std::nullopt);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_choice(const std::string& key, const std::string& fallback, const std::vector<std::string>& allowed);
  // An int n (meaning [n, n]) or a two-element array [a, b].
  std::array<int64_t, 2> get_pair(const std::string& key, std::optional<std::array<int64_t, 2>> fallback = std::nullopt);
  // Throws if the table has keys that were never read.
  void finish() const;

  // Throws UserError "<where>: <key> (line N): <message>".
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  const std::string& where() const { return where_; }

 private:
  const toml::node* lookup(const std::string& key);
  const toml::table& table_;
  std::string where_;
  std::set<std::string> used_{"type", "name"};
};

}  // namespace distrain
