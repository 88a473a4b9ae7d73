#include "core/layers/registry.hpp"

#include <fmt/ranges.h>

#include <map>

namespace distrain {

namespace {
std::map<std::string, LayerFactory>& factories() {
  static std::map<std::string, LayerFactory> f;
  return f;
}
}  // namespace

void Layer::fail(const std::string& message) const { throw UserError(fmt::format("layer '{}': {}", name_, message)); }

bool register_layer(const std::string& type, LayerFactory factory) {
  DT_CHECK(factories().emplace(type, std::move(factory)).second, "layer type '{}' registered twice", type);
  return true;
}

std::vector<std::string> known_layer_types() {
  std::vector<std::string> names;
  for (const auto& [k, v] : factories()) names.push_back(k);
  return names;
}

std::unique_ptr<Layer> create_layer(ConfigTable& config) {
  const std::string type = config.get_string("type");
  auto it = factories().find(type);
  if (it == factories().end())
    config.fail("type", fmt::format("unknown layer type '{}' (known: {})", type, fmt::join(known_layer_types(), ", ")));
  const std::string name = config.get_string("name", "");
  auto layer = it->second(config);
  config.finish();
  layer->set_name(name);
  return layer;
}

}  // namespace distrain
