// Layer: one step of a model with explicit forward and backward (as Caffe and llm.c).
//
// Contract:
//   setup(in)        in is the per-example input shape (no batch dimension); declares the
//                    layer's variables in the arena and returns the per-example output shape.
//                    Throws UserError naming the layer when the input shape does not fit.
//   forward(in,out)  in (N, ...) -> out (N, ...), out written.
//   backward         din written (=), parameter gradients accumulated (+=) into the arena.
//                    dout is consumed and may be overwritten. din may be empty (the model's
//                    input needs no gradient); then the layer skips that work.
#pragma once
#include <memory>
#include <string>

#include "core/backend/backend.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

// Recipe limits that keep shape arithmetic inside int64: a kernel, pool or stride is at
// most kMaxWindow; a per-example extent, element count or variable at most kMaxExtent
// elements (Model and the layers refuse more with a UserError).
inline constexpr int64_t kMaxWindow = int64_t{1} << 16;
inline constexpr int64_t kMaxExtent = int64_t{1} << 40;

struct Ctx {
  Backend& backend;
  bool training = true;
  uint64_t step_seed = 0;  // differs per step and replica: drives dropout masks
  // Set under sync_batch_norm: batch norm then uses statistics of the global batch.
  const CrossReplicaSum* cross_replica_sum = nullptr;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string type() const = 0;
  virtual Shape setup(const Shape& in, ParamArena& arena) = 0;
  virtual void forward(Ctx& ctx, const Tensor& in, Tensor out) = 0;
  virtual void backward(Ctx& ctx, const Tensor& in, const Tensor& out, Tensor dout, Tensor din) = 0;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  int index() const { return index_; }
  void set_index(int i) { index_ = i; }

 protected:
  // Throws UserError "layer 'conv2d_1': <message>".
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::string name_;
  int index_ = 0;
};

}  // namespace distrain
