#include "core/strategy/zero_gatherers.hpp"

#include "core/backend/backend.hpp"
#include "core/strategy/zero_reducers.hpp"

namespace distrain {

namespace {

// Layer l's chunks from every replica's shard, n x C_l elements at the start of `into`:
// the layer's range of the arena, laid out from its first element.
Tensor gather_layer(Communicator& all, const ShardLayout& layout, size_t l, const Tensor& shard, Tensor into) {
  const int64_t chunk = layout.chunk(l);
  const Tensor gathered = into.range(0, chunk * layout.replicas());
  all.all_gather(shard.range(layout.offset(l), chunk), gathered);
  return gathered;
}

}  // namespace

void GatherUpdates::attach(ParamArena& arena, const std::vector<Range>& layers) {
  backend_ = &arena.backend();
  layers_ = layers;
  layout_ = ShardLayout(layers, all_.size());
  const int64_t size = arena.trainable_arena_size();
  values_ = Buffer(*backend_, Shape{size + ParamArena::kAlign * all_.size()});
  shard_ = Buffer(*backend_, Shape{layout_.size()});
  for (const Buffer* b : {&values_, &shard_})
    if (!b->empty()) backend_->fill(b->view(), 0.0f);
  arena.bind_values(0, values_.view().range(0, size));
}

// The whole values may have been written since the last update (a checkpoint, replica 0's
// copy), so the shard is taken from them every step; it is 1/n of the parameters.
void GatherUpdates::before_update() {
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Range mine = layout_.own(l, all_.rank());
    if (!mine.empty())
      backend_->copy(values_.view().range(mine.begin, mine.size()), shard_.view().range(layout_.offset(l), mine.size()));
  }
}

void GatherUpdates::after_update() {
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Range r = layers_[l];
    if (r.empty()) continue;
    const Tensor from_layer = values_.view().range(r.begin, values_.view().numel() - r.begin);
    gather_layer(all_, layout_, l, shard_.view(), from_layer);
  }
}

void ShardGatherer::attach(ParamArena& arena, const std::vector<Range>& layers) {
  arena_ = &arena;
  layers_ = layers;
  layout_ = ShardLayout(layers, all_.size());
  shard_ = Buffer(arena.backend(), Shape{layout_.size()});
  if (!shard_.empty()) arena.backend().fill(shard_.view(), 0.0f);
  bucket_ = layer_bucket(arena.backend(), layout_);
  arena.bind_values(0, Tensor{});
}

void ShardGatherer::gather(size_t layer) {
  const Range r = layers_.at(layer);
  if (r.empty()) return;
  arena_->bind_values(r.begin, gather_layer(all_, layout_, layer, shard_.view(), bucket_.view()));
}

}  // namespace distrain
