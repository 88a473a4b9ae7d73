#include "core/strategy/model_update.hpp"

#include "core/optim/weight_decay.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

ModelUpdate::ModelUpdate(const Recipe& recipe, Model& model, Backend& device, const ShardLayout* shards, int shard)
    : model_(model), optimizer_(make_optimizer(recipe.optimizer)) {
  const std::vector<Range> decayed = decayed_ranges(model.params());
  optimizer_->bind(optimizer_place(recipe.strategy, device), model.gatherer().own().numel(),
                   shards ? shards->in_shard(decayed, shard) : decayed);
}

void ModelUpdate::apply(float learning_rate, float gradient_scale) {
  model_.gatherer().before_update();
  optimizer_->update(model_.gatherer().own(), model_.reducer().own(), learning_rate, gradient_scale);
  model_.gatherer().after_update();
}

}  // namespace distrain
