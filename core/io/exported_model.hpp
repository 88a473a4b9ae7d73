// A trained model as the exporters (export_keras.hpp, export_onnx.hpp) see it: its layers
// in order with their types, names, settings (Layer::settings), inputs and output shapes,
// and their variables' whole values on the host, in Keras shapes. Taken once from a Model
// holding a checkpoint's weights, so that the writers need no backend.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/dtype.hpp"
#include "core/base/json.hpp"
#include "core/base/shape.hpp"

namespace distrain {

class Model;

struct ExportedVariable {
  std::string name;  // as in checkpoints: kernel, bias, gamma, ...
  Shape shape;
  std::vector<float> values;
};

struct ExportedLayer {
  std::string type, name;
  Json settings;
  std::vector<int> inputs;  // earlier layers' indices; -1 is the model's input
  Shape output;             // per example
  std::vector<ExportedVariable> variables;  // in the order the layer declares them

  // The variable `name`; throws naming the layer when it has none.
  const ExportedVariable& variable(const std::string& name) const;
  bool has(const std::string& name) const;
};

struct ExportedModel {
  std::string name;  // the recipe's
  Shape input_shape;  // per example
  DType input_dtype = DType::f32;  // float32 values, or int32 token ids
  std::vector<ExportedLayer> layers;
  // Every layer reads the one before it: a Keras Sequential model.
  bool chain() const;
  // The longest input sequence a token model takes: its position table's rows (the longest
  // table), or its input length without one.
  int64_t longest_sequence() const;
};

// `model` holds the weights to export (a one-device model: variables whole).
ExportedModel export_view(const Model& model, const std::string& name);

// Throws UserError "export --format <format>: layer '<name>' (<type>) <why>".
[[noreturn]] void refuse_layer(const std::string& format, const ExportedLayer& layer, const std::string& why);

}  // namespace distrain
