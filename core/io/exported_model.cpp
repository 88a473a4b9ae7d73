#include "core/io/exported_model.hpp"

#include <algorithm>

#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/model/model.hpp"

namespace distrain {

const ExportedVariable& ExportedLayer::variable(const std::string& wanted) const {
  for (const ExportedVariable& v : variables)
    if (v.name == wanted) return v;
  throw UserError(fmt::format("layer '{}' ({}) has no variable '{}'", name, type, wanted));
}

bool ExportedLayer::has(const std::string& wanted) const {
  for (const ExportedVariable& v : variables)
    if (v.name == wanted) return true;
  return false;
}

bool ExportedModel::chain() const {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].inputs != std::vector<int>{static_cast<int>(i) - 1}) return false;
  return true;
}

int64_t ExportedModel::longest_sequence() const {
  int64_t longest = input_shape[0];
  for (const ExportedLayer& layer : layers)
    if (layer.type == "position_embedding") longest = std::max(longest, layer.variable("embeddings").shape[0]);
  return longest;
}

ExportedModel export_view(const Model& model, const std::string& name) {
  ExportedModel out{name, model.input_shape(), model.input_dtype(), {}};
  const ParamArena& arena = model.params();
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    ExportedLayer& e = out.layers.emplace_back();
    e.type = layer.type();
    e.name = layer.name();
    e.settings = layer.settings();
    e.inputs = model.layer_inputs(i);
    e.output = model.layer_shapes()[i];
    for (size_t id = 0; id < arena.variables().size(); ++id) {
      const Variable& v = arena.variables()[id];
      if (v.layer != layer.name()) continue;
      DT_CHECK(v.shape == v.full_shape, "exporting a slice of {}/{}", v.layer, v.name);
      ExportedVariable& ev = e.variables.emplace_back(ExportedVariable{v.name, v.full_shape, {}});
      ev.values.resize(static_cast<size_t>(v.full_shape.numel()));
      model.backend().download(arena.value(static_cast<int>(id)), ev.values.data());
    }
  }
  return out;
}

void refuse_layer(const std::string& format, const ExportedLayer& layer, const std::string& why) {
  throw UserError(fmt::format("export --format {}: layer '{}' ({}) {}", format, layer.name, layer.type, why));
}

}  // namespace distrain
