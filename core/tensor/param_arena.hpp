// ParamArena: every variable of a model in a few contiguous arenas (as llm.c and Caffe):
//   values   trainable parameters        (one all-reduce per step, ZeRO shards are ranges)
//   grads    their gradients, same offsets
//   state    non-trainable variables (batch-norm moving statistics)
// Layers declare variables during setup and keep a ParamRef; views exist after allocate().
// Each variable starts on a 16-float boundary; the padding is zero and stays zero.
#pragma once
#include <string>
#include <vector>

#include "core/tensor/buffer.hpp"

namespace distrain {

class Backend;

enum class Init { zeros, ones, glorot_uniform, he_normal };

// name: one of glorot_uniform, he_normal, zeros, ones (validated by the caller).
Init parse_init(const std::string& name);

struct Variable {
  std::string layer, name;  // checkpoint path /model/<layer>/<name>
  Shape shape;              // Keras conventions: conv (kh, kw, in, out), dense (in, out)
  Init init;
  int64_t fan_in, fan_out;
  bool trainable;
  int64_t offset;  // in elements, into values/grads (trainable) or state (not)
};

class ParamArena;

struct ParamRef {
  const ParamArena* arena = nullptr;
  int id = -1;
  Tensor value() const;
  Tensor grad() const;  // trainable variables only
};

class ParamArena {
 public:
  static constexpr int64_t kAlign = 16;

  ParamRef declare(std::string layer, std::string name, Shape shape, Init init, int64_t fan_in, int64_t fan_out,
                   bool trainable);
  // Allocates the arenas (zeroed) on the backend's device. No declarations after this.
  // Without full_gradients (full_values) there is no gradient (trainable value) arena:
  // they go through windows that the owner (ZeRO stages 2 and 3) sets around each layer.
  void allocate(Backend& backend, bool full_gradients = true, bool full_values = true);
  // grad(id) / value(id) of a trainable variable in [begin, begin + window.numel())
  // becomes a view into window.
  void set_gradient_window(int64_t begin, Tensor window);
  void clear_gradient_window() { window_ = Tensor{}; }
  void set_value_window(int64_t begin, Tensor window);
  void clear_value_window() { value_window_ = Tensor{}; }
  // Draws every variable from the seed. A variable's values depend only on the seed and its
  // layer/name, so adding a layer does not change the others.
  void initialize(uint64_t seed);
  // What initialize() puts in variable id, on the host.
  std::vector<float> initial_value(int id, uint64_t seed) const;

  Tensor value(int id) const;
  Tensor grad(int id) const;
  Tensor values() const { return values_.view(); }
  Tensor grads() const { return grads_.view(); }
  Tensor state() const { return state_.view(); }
  const std::vector<Variable>& variables() const { return variables_; }
  // The id of layer/name, or -1.
  int find(const std::string& layer, const std::string& name) const;
  int64_t trainable_elements() const;  // without padding
  int64_t trainable_arena_size() const { return values_size_; }  // with padding, allocated or not
  Backend& backend() const { return *backend_; }

 private:
  std::vector<Variable> variables_;
  int64_t values_size_ = 0, state_size_ = 0;
  Backend* backend_ = nullptr;
  Buffer values_, grads_, state_;
  int64_t window_begin_ = 0, value_window_begin_ = 0;
  Tensor window_, value_window_;
};

}  // namespace distrain
