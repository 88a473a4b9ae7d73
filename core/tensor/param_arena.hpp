// ParamArena: every variable of a model laid out in a few contiguous arenas (as llm.c and Caffe):
//   values   trainable parameters        (one all-reduce per step, ZeRO shards are ranges)
//   grads    their gradients, same offsets
//   state    non-trainable variables (batch-norm moving statistics), owned here
// Layers declare variables during setup and keep a ParamRef; views exist after allocate()
// (state) and while storage is bound (trainable values and gradients).
// Each variable starts on a 16-float boundary; the padding is zero and stays zero.
//
// The arena owns the layout and the state, not the storage of trainable values and
// gradients: whoever decides where they live (a model's ParamGatherer and GradientReducer)
// binds it here, for the whole arena or for one layer's range while that layer runs.
#pragma once
#include <string>
#include <vector>

#include "core/base/range.hpp"
#include "core/tensor/buffer.hpp"
#include "core/tensor/tensor_slice.hpp"

namespace distrain {

class Backend;

// normal: N(0, stddev) with the variable's stddev (GPT-2's 0.02, or less for residual projections).
enum class Init { zeros, ones, glorot_uniform, he_normal, normal };

// name: one of glorot_uniform, he_normal, zeros, ones, normal (validated by the caller).
Init parse_init(const std::string& name);

struct Variable {
  std::string layer, name;  // checkpoint path /model/<layer>/<name>
  Shape shape;              // what this rank holds: the whole variable, or its slice
  Init init;
  int64_t fan_in, fan_out;  // of the whole variable
  bool trainable;
  int64_t offset;           // in elements, into values/grads (trainable) or state (not)
  Shape full_shape;         // Keras conventions: conv (kh, kw, in, out), dense (in, out)
  TensorSlice slice;        // which slice of full_shape `shape` is (tensor parallelism)
  double stddev = 0;        // Init::normal's
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
  // The element type of values, gradients, state and optimizer slots: byte counts come from it.
  static constexpr DType kDType = DType::f32;

  // `shape` is the whole variable's; with a `slice`, this rank holds (and the arena lays
  // out) only that slice of it.
  ParamRef declare(std::string layer, std::string name, Shape shape, Init init, int64_t fan_in, int64_t fan_out,
                   bool trainable, TensorSlice slice = {}, double stddev = 0.02);
  // Allocates the state arena (zeroed) on the backend's device. No declarations after this.
  void allocate(Backend& backend);
  // value(id) / grad(id) of a trainable variable inside [begin, begin + storage.numel())
  // become views into storage until the next bind; an empty storage binds nothing.
  void bind_values(int64_t begin, Tensor storage);
  void bind_grads(int64_t begin, Tensor storage);
  // From now on the non-trainable state lives in `storage` (another arena's state() of
  // the same layout), so that copies of a model update one set of moving statistics.
  void share_state(Tensor storage);
  // Draws every variable from the seed. A variable's values depend only on the seed and its
  // layer/name, so adding a layer does not change the others.
  void initialize(uint64_t seed);
  // What initialize() puts in variable id, on the host: the variable's slice of what the
  // whole variable draws, so every layout starts from one_device's values.
  std::vector<float> initial_value(int id, uint64_t seed) const;
  // The whole variable's initial values (full_shape), whatever this rank holds of it.
  std::vector<float> whole_initial_value(int id, uint64_t seed) const;

  Tensor value(int id) const;
  Tensor grad(int id) const;
  // All trainable values (gradients) when storage for the whole arena is bound, else an
  // empty tensor (numel 0).
  Tensor values() const { return whole(values_begin_, values_); }
  // The bound values of arena range r (which the bound storage must cover).
  Tensor bound_values(Range r) const;
  Tensor grads() const { return whole(grads_begin_, grads_); }
  Tensor state() const { return shared_state_.empty() ? state_.view() : shared_state_; }
  const std::vector<Variable>& variables() const { return variables_; }
  // The id of layer/name, or -1.
  int find(const std::string& layer, const std::string& name) const;
  int64_t trainable_elements() const;  // without padding
  int64_t trainable_arena_size() const { return values_size_; }  // with padding, allocated or not
  Backend& backend() const { return *backend_; }

 private:
  Tensor whole(int64_t begin, const Tensor& bound) const;
  // Variable id (trainable) in `bound`, which starts at arena offset `begin`.
  Tensor view_in(int id, int64_t begin, const Tensor& bound, const char* what) const;

  std::vector<Variable> variables_;
  int64_t values_size_ = 0, state_size_ = 0;
  Backend* backend_ = nullptr;
  Buffer state_;
  int64_t values_begin_ = 0, grads_begin_ = 0;
  Tensor values_, grads_;  // bound storage, see bind_values()
  Tensor shared_state_;    // see share_state()
};

}  // namespace distrain
