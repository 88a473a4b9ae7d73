#include "core/strategy/zero_reducers.hpp"

#include <algorithm>

#include "core/backend/backend.hpp"

namespace distrain {

void scatter_layer(Communicator& all, const ShardLayout& layout, size_t l, const Tensor& bucket, Tensor chunk) {
  all.reduce_scatter(bucket.range(0, layout.chunk(l) * layout.replicas()), chunk, ReduceOp::sum);
}

Buffer layer_bucket(Backend& backend, const ShardLayout& layout) {
  Buffer bucket(backend, Shape{layout.bucket_size()});
  if (!bucket.empty()) backend.fill(bucket.view(), 0.0f);
  return bucket;
}

void ScatterAtFlush::attach(ParamArena& arena, const std::vector<Range>& layers) {
  FullGradients::attach(arena, layers);
  backend_ = &arena.backend();
  layers_ = layers;
  layout_ = ShardLayout(layers, all_.size());
  shard_ = Buffer(*backend_, Shape{layout_.size()});
  bucket_ = layer_bucket(*backend_, layout_);
}

void ScatterAtFlush::flush() {
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Range r = layers_[l];
    if (r.empty()) continue;
    const int64_t n = layout_.chunk(l) * layout_.replicas();
    const Tensor padded = bucket_.view().range(0, n);
    backend_->copy(whole().range(r.begin, r.size()), padded.range(0, r.size()));
    if (n > r.size()) backend_->fill(padded.range(r.size(), n - r.size()), 0.0f);  // the padding sums to zero
    scatter_layer(all_, layout_, l, padded, shard_.view().range(layout_.offset(l), layout_.chunk(l)));
  }
}

int64_t ScatterAtFlush::bytes() const {
  return FullGradients::bytes() + static_cast<int64_t>(shard_.view().bytes() + bucket_.view().bytes());
}

void ShardingReducer::attach(ParamArena& arena, const std::vector<Range>& layers) {
  arena_ = &arena;
  layers_ = layers;
  layout_ = ShardLayout(layers, all_.size());
  shard_ = Buffer(arena.backend(), Shape{layout_.size()});
  if (!shard_.empty()) arena.backend().fill(shard_.view(), 0.0f);
  bucket_ = layer_bucket(arena.backend(), layout_);
  reduced_ = Buffer(arena.backend(), Shape{layout_.bucket_size() / std::max(1, layout_.replicas())});
}

void ShardingReducer::zero() {
  if (!shard_.empty()) arena_->backend().fill(shard_.view(), 0.0f);
}

// The whole padded bucket starts at zero: the padding past the layer must sum to zero.
void ShardingReducer::open(size_t layer) {
  const Range r = layers_.at(layer);
  if (r.empty()) return;
  const Tensor bucket = bucket_.view().range(0, layout_.chunk(layer) * layout_.replicas());
  arena_->backend().fill(bucket, 0.0f);
  arena_->bind_grads(r.begin, bucket);
}

void ShardingReducer::reduce(size_t layer) {
  if (layers_.at(layer).empty()) return;
  arena_->bind_grads(0, Tensor{});
  const int64_t chunk = layout_.chunk(layer);
  const Tensor reduced = reduced_.view().range(0, chunk);
  scatter_layer(all_, layout_, layer, bucket_.view(), reduced);
  arena_->backend().axpby(1.0f, reduced, 1.0f, shard_.view().range(layout_.offset(layer), chunk));
}

}  // namespace distrain
