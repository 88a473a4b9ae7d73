#include "core/layers/layer_config.hpp"

#include "core/base/error.hpp"

namespace distrain {

namespace {
std::string line_of(const toml::node& n) {
  const auto& src = n.source();
  return src.begin.line ? fmt::format(" (line {})", src.begin.line) : "";
}
}  // namespace

LayerConfig::LayerConfig(const toml::table& table, std::string where) : table_(table), where_(std::move(where)) {}

void LayerConfig::fail(const std::string& key, const std::string& message) const {
  const toml::node* n = table_.get(key);
  throw UserError(fmt::format("{}: {}{}: {}", where_, key, n ? line_of(*n) : "", message));
}

const toml::node* LayerConfig::lookup(const std::string& key) {
  used_.insert(key);
  return table_.get(key);
}

std::string LayerConfig::type() const {
  const toml::node* n = table_.get("type");
  if (!n) throw UserError(fmt::format("{}: missing key 'type'", where_));
  if (!n->is_string()) fail("type", "expected a string such as \"conv2d\"");
  return n->as_string()->get();
}

std::optional<std::string> LayerConfig::name() {
  const toml::node* n = lookup("name");
  if (!n) return std::nullopt;
  if (!n->is_string() || n->as_string()->get().empty()) fail("name", "expected a non-empty string");
  return n->as_string()->get();
}

int64_t LayerConfig::get_int(const std::string& key, std::optional<int64_t> fallback) {
  const toml::node* n = lookup(key);
  if (!n) {
    if (!fallback) fail(key, "missing (required)");
    return *fallback;
  }
  if (!n->is_integer()) fail(key, "expected an integer");
  return n->as_integer()->get();
}

double LayerConfig::get_float(const std::string& key, std::optional<double> fallback) {
  const toml::node* n = lookup(key);
  if (!n) {
    if (!fallback) fail(key, "missing (required)");
    return *fallback;
  }
  if (n->is_integer()) return static_cast<double>(n->as_integer()->get());
  if (!n->is_floating_point()) fail(key, "expected a number");
  return n->as_floating_point()->get();
}

bool LayerConfig::get_bool(const std::string& key, bool fallback) {
  const toml::node* n = lookup(key);
  if (!n) return fallback;
  if (!n->is_boolean()) fail(key, "expected true or false");
  return n->as_boolean()->get();
}

std::string LayerConfig::get_choice(const std::string& key, const std::string& fallback,
                                    const std::vector<std::string>& allowed) {
  const toml::node* n = lookup(key);
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  if (!n) return fallback;
  if (!n->is_string()) fail(key, "expected one of " + list);
  const std::string v = n->as_string()->get();
  for (const auto& a : allowed)
    if (a == v) return v;
  fail(key, fmt::format("'{}' is not one of {}", v, list));
}

std::array<int64_t, 2> LayerConfig::get_pair(const std::string& key, std::optional<std::array<int64_t, 2>> fallback) {
  const toml::node* n = lookup(key);
  if (!n) {
    if (!fallback) fail(key, "missing (required)");
    return *fallback;
  }
  if (n->is_integer()) return {n->as_integer()->get(), n->as_integer()->get()};
  const toml::array* a = n->as_array();
  if (!a || a->size() != 2 || !(*a)[0].is_integer() || !(*a)[1].is_integer())
    fail(key, "expected an integer or a pair of integers [h, w]");
  return {(*a)[0].as_integer()->get(), (*a)[1].as_integer()->get()};
}

void LayerConfig::finish() const {
  for (const auto& [k, v] : table_) {
    const std::string key(k.str());
    if (!used_.count(key)) fail(key, "unknown key for this layer type");
  }
}

}  // namespace distrain
