// ModelUpdate: the one update path of every strategy whose replicas train a Model (one
// device, mirrored, multi-worker mirrored, zero, the mesh): reducer -> update -> gatherer.
//   - the model's reducer holds the reduced gradients of the elements this replica updates:
//     the whole trainable arena, or its ZeRO shard (core/strategy/shard_layout.hpp);
//   - an optimizer, placed on the replica's device or, with strategy.offload_optimizer, in
//     host memory (optimizer_place), updates the gatherer's values of those elements;
//   - the gatherer shares the update (ZeRO's all-gather) around it.
// Built once per replica (from the shard layout where it updates a shard). (central_storage and the parameter server keep their
// variables outside any model, on the host or a server, and update them there.)
#pragma once
#include <memory>

#include "core/io/recipe.hpp"
#include "core/model/model.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/shard_layout.hpp"

namespace distrain {

class ModelUpdate {
 public:
  // `shards` and `shard`: the layout of a sharded update and this replica's index in it;
  // null: the replica updates the whole arena.
  ModelUpdate(const Recipe& recipe, Model& model, Backend& device, const ShardLayout* shards = nullptr, int shard = 0);
  // One update at the schedule's learning rate, the gradients first scaled by clipping's
  // gradient_scale.
  void apply(float learning_rate, float gradient_scale);
  Optimizer& optimizer() { return *optimizer_; }
  const Optimizer& optimizer() const { return *optimizer_; }

 private:
  Model& model_;
  std::unique_ptr<Optimizer> optimizer_;
};

}  // namespace distrain
