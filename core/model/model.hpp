// Model: an ordered list of layers built from a recipe's [model] table, with shape
// inference at build time and all variables in one ParamArena.
//
// Activations for a batch of N are kept per layer (backward needs each layer's input
// and output); they are reallocated only when N changes.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "core/layers/layer.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

class Model {
 public:
  // `model` is the [model] table: input_shape and [[model.layers]]; `file` names the
  // recipe for errors. Throws UserError on a bad layer or a shape mismatch.
  Model(const toml::table& model, const std::string& file, Backend& backend, bool full_gradients = true,
        bool full_values = true);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // x (N, input_shape...) -> the last layer's output (N, output_shape...), a view owned here.
  Tensor forward(Ctx& ctx, const Tensor& x);
  // Where the loss writes the gradient of the output before backward().
  Tensor output_grad() const { return dacts_.back().view(); }
  // Propagates output_grad() back; parameter gradients accumulate into the arena.
  void backward(Ctx& ctx);
  // Called around each layer's forward and backward (ZeRO stage 3 gathers a layer's
  // parameters just before and releases them after; stage 2 reduces a layer's gradients
  // as soon as they are complete). The *_hooks_only() calls run them without computing, so
  // that a replica with no examples still takes part in their collectives.
  struct LayerHooks {
    std::function<void(size_t layer)> before_forward, after_forward, before_backward, after_backward;
  };
  void set_layer_hooks(LayerHooks hooks) { hooks_ = std::move(hooks); }
  void forward_hooks_only();
  void backward_hooks_only();
  // [begin, end) of the arena holding layer i's trainable variables (begin == end: none).
  std::pair<int64_t, int64_t> trainable_range(size_t layer) const { return ranges_.at(layer); }
  void zero_grads();

  ParamArena& params() { return arena_; }
  const ParamArena& params() const { return arena_; }
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return shapes_.back(); }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  Backend& backend() const { return backend_; }
  // Bytes of the activations and their gradients kept for a batch of n (float32).
  // Saturates at INT64_MAX: a batch whose activations cannot be counted cannot be held.
  int64_t activation_bytes(int64_t n) const;
  // A table: layer, type, output shape, parameters.
  std::string summary() const;

 private:
  void ensure_activations(int64_t n);

  Backend& backend_;
  Shape input_shape_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_;  // per-example output shape of each layer
  size_t first_trainable_ = 0;  // layers up to this one need no input gradient
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // per layer, see trainable_range()
  LayerHooks hooks_;
  ParamArena arena_;
  int64_t batch_ = -1;
  Tensor input_;
  std::vector<Buffer> acts_, dacts_;  // (N, shapes_[i]...)
};

}  // namespace distrain
