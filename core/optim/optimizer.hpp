// Optimizers over a range of the parameter arena: the whole arena (replicated
// strategies) or one rank's shard (ZeRO). Slots (momentum, Adam moments) live in arenas
// of their own with the same offsets as the range they serve. Keras 3 defaults and
// update rules; weight decay is decoupled (p -= p * weight_decay * lr) as in Keras, and
// applies to the elements bind() names only (kernels: weight_decay.hpp).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/base/range.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

struct OptimizerSpec {
  std::string type = "adam";  // sgd | adam | adamw
  double learning_rate = 0.001;
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;  // adam, adamw
  double weight_decay = 0.0;                           // adamw defaults to 0.004
  double clip_norm = 0.0;  // > 0: gradients scaled so that their global norm is at most this
};

// ", clip_norm X" when the spec clips, else "": for describe().
std::string clipping(const OptimizerSpec& spec);

// The spec with Keras' defaults for `type` (learning rate 0.01 for sgd, 0.001 for adam/adamw).
OptimizerSpec default_optimizer_spec(const std::string& type);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Allocates zeroed slots for `count` elements on the backend's device; weight decay
  // applies to the elements in `decayed` (ranges of [0, count), in order) only.
  void bind(Backend& backend, int64_t count, const std::vector<Range>& decayed);
  // One update of params (count) with grads (count) at learning rate lr, the gradients
  // first multiplied by gradient_scale (clipping), in place.
  void update(Tensor params, const Tensor& grads, float lr, float gradient_scale = 1.0f);
  // Named slot tensors, for checkpoints ("momentum"; "m", "v").
  virtual std::vector<std::pair<std::string, Tensor>> slots() const = 0;
  // The slots' names in order, and one slot by name (an Error when there is none).
  std::vector<std::string> slot_names() const;
  Tensor slot(const std::string& name) const;
  virtual std::string describe() const = 0;
  virtual std::string type() const = 0;  // sgd | adam | adamw

  int64_t iterations() const { return iterations_; }
  void set_iterations(int64_t n) { iterations_ = n; }

 protected:
  virtual void allocate_slots(Backend& backend, int64_t count) = 0;
  // The update of elements `r` (iterations() already counts it), with or without weight decay.
  virtual void update_range(Tensor params, const Tensor& grads, Range r, float lr, bool decay) = 0;
  Backend* backend_ = nullptr;
  int64_t iterations_ = 0;

 private:
  struct Segment {
    Range range;
    bool decay;
  };
  std::vector<Segment> segments_;  // [0, count) in runs that decay or do not
};

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec);

}  // namespace distrain
