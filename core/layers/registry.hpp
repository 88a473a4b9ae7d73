// Layer registry keyed by the Keras type name. Each layer file registers itself with
// one line, DT_REGISTER_LAYER("conv2d", Conv2D); an unknown type lists the known ones.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/config_table.hpp"
#include "core/layers/layer.hpp"

namespace distrain {

using LayerFactory = std::function<std::unique_ptr<Layer>(ConfigTable&)>;

bool register_layer(const std::string& type, LayerFactory factory);
// Builds a layer from its table (type, optional name, attributes); rejects unknown keys.
// The layer's name is the table's `name`, or empty for the model to assign.
std::unique_ptr<Layer> create_layer(ConfigTable& config);
std::vector<std::string> known_layer_types();

}  // namespace distrain

#define DT_REGISTER_LAYER(type_name, Class)                                         \
  [[maybe_unused]] static const bool dt_registered_##Class = ::distrain::register_layer( \
      type_name, [](::distrain::ConfigTable& config) { return std::make_unique<Class>(config); })
