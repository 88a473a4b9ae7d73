// Strategy: how replicas share a training step (tf.distribute's idea, chosen at run time
// by [strategy] name). A step is always: every replica computes gradients on its slice of
// the global batch (loss divided by the GLOBAL batch), the strategy reduces them (one
// fused collective over the gradient arena, a reduce-scatter, or a push to servers), the
// optimizer updates. Metrics come back as sums and counts over all replicas.
#pragma once
#include <memory>
#include <string>

#include "core/io/recipe.hpp"
#include "core/model/model.hpp"
#include "core/optim/optimizer.hpp"
#include "datasets/loader.hpp"

namespace distrain {

struct StepInfo {
  int64_t step = 0;            // optimizer steps done before this one
  float learning_rate = 0.0f;  // from the schedule, for the global batch
  uint64_t seed = 0;           // this step's seed (dropout masks)
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual int num_replicas() const = 0;
  // One line: devices, replicas, how gradients travel.
  virtual std::string describe() const = 0;

  // The model whose variables are the reference copy: initialised, checkpointed, evaluated.
  virtual Model& model() = 0;
  virtual Optimizer& optimizer() = 0;

  // The whole step: gradients, reduction, update. Returns metrics over all replicas.
  LossStats train_step(const Batch& batch, const StepInfo& info) {
    const LossStats stats = compute_gradients(batch, info);
    reduce_gradients();
    apply_update(info);
    return stats;
  }
  // Loss and accuracy of the current variables on a batch, no update.
  virtual LossStats evaluate(const Batch& batch) = 0;

 protected:
  virtual LossStats compute_gradients(const Batch& batch, const StepInfo& info) = 0;
  virtual void reduce_gradients() = 0;
  virtual void apply_update(const StepInfo& info) = 0;
};

// Builds the strategy a recipe names; its variables are allocated, not yet initialised.
std::unique_ptr<Strategy> make_strategy(const Recipe& recipe);

}  // namespace distrain
