// ModelSpec: a recipe's [model] table, read once and checked: the input, and the layer
// graph with repeat blocks expanded, each layer configured from its table (a prototype
// that models copy), its inputs resolved to indices and its output shape inferred. Every
// Model is built from it (core/model/model.hpp); nothing reads [model] again.
#pragma once
#include <memory>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "core/base/shape.hpp"
#include "core/layers/layer.hpp"

namespace distrain {

struct LayerSpec {
  std::string key;    // where the recipe defines it: model.layers[3].layers[1]
  std::string where;  // "<file>:<line>" of that table, for messages
  std::vector<int> inputs;  // earlier layers' indices; -1 is the model's input
  std::shared_ptr<const Layer> prototype;  // configured and named, never set up
  Shape output;  // per example
  int block = -1;  // the outermost repeat copy it belongs to (a transformer block), -1: none
};

struct ModelSpec {
  static constexpr size_t kMaxLayers = 1 << 16;  // after repeat blocks are expanded

  std::string file;  // the recipe, for messages
  Shape input_shape;
  DType input_dtype = DType::f32;  // float32 values, or int32 token ids (the model starts with an embedding)
  std::vector<LayerSpec> layers;
  int blocks = 0;  // outermost repeat copies
  // Every layer reads the one before it (no named inputs): what tensor and pipeline
  // parallelism split.
  bool chain() const;
  // Throws UserError "<file>:<line>: <key>: <message>" for layer i.
  [[noreturn]] void fail(size_t i, const std::string& message) const;
};

// `model` is the [model] table: input_shape and [[model.layers]]; `file` names the recipe.
// Throws UserError naming the file, line and key for a bad layer, name, input or shape.
ModelSpec parse_model_spec(const toml::table& model, const std::string& file);

// The graph read the other way: for each layer (index into `inputs`, a layer list's
// `inputs` as LayerSpec and Model keep them), the layers that read its output, in order.
std::vector<std::vector<size_t>> readers_of(const std::vector<std::vector<int>>& inputs);

// Layer i of `spec`'s output shape for inputs of shapes `in`: its setup() into `arena`,
// its errors named after its key.
Shape infer_output_shape(const ModelSpec& spec, size_t i, Layer& layer, const std::vector<Shape>& in, ParamArena& arena);

}  // namespace distrain
