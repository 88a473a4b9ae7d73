// Layer registry keyed by the Keras type name. Each layer file registers itself with
// one line, DT_REGISTER_LAYER("conv2d", Conv2D); an unknown type lists the known ones.
// A layer is read from its recipe table once (the model spec's prototype, core/io/
// model_spec.hpp); models build theirs as copies of it.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/config_table.hpp"
#include "core/layers/layer.hpp"

namespace distrain {

using LayerFactory = std::function<std::unique_ptr<Layer>(ConfigTable&)>;
using LayerCopier = std::function<std::unique_ptr<Layer>(const Layer&)>;

bool register_layer(const std::string& type, LayerFactory factory, LayerCopier copier);
// Builds a layer from its table (type, optional name, attributes); rejects unknown keys.
// The layer's name is the table's `name`, or empty for the model to assign.
std::unique_ptr<Layer> create_layer(ConfigTable& config);
// A layer configured as `prototype` (type, name, attributes) and not set up: its copy
// constructor's work, which leaves out what a layer keeps for its passes (LayerBuffer).
std::unique_ptr<Layer> copy_layer(const Layer& prototype);
std::vector<std::string> known_layer_types();

}  // namespace distrain

#define DT_REGISTER_LAYER(type_name, Class)                                                     \
  [[maybe_unused]] static const bool dt_registered_##Class = ::distrain::register_layer(             \
      type_name, [](::distrain::ConfigTable& config) { return std::make_unique<Class>(config); },    \
      [](const ::distrain::Layer& l) { return std::make_unique<Class>(static_cast<const Class&>(l)); })
