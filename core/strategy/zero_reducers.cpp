#include "core/strategy/zero_reducers.hpp"

#include <algorithm>

#include "core/backend/backend.hpp"

namespace distrain {

void ShardingReducer::attach(ParamArena& arena, const std::vector<Range>& layers) {
  arena_ = &arena;
  layers_ = layers;
  const ShardLayout shards(arena.trainable_arena_size(), all_.size());
  own_ = shards.own(all_.rank());
  int64_t largest = 0;
  for (const Range& r : layers) largest = std::max(largest, r.size());
  shard_ = Buffer(arena.backend(), Shape{shards.shard});
  bucket_ = Buffer(arena.backend(), Shape{largest});
  zero();
}

void ShardingReducer::zero() {
  if (!shard_.empty()) arena_->backend().fill(shard_.view(), 0.0f);
}

void ShardingReducer::open(size_t layer) {
  const Range r = layers_.at(layer);
  if (r.empty()) return;
  const Tensor bucket = bucket_.view().range(0, r.size());
  arena_->backend().fill(bucket, 0.0f);
  arena_->bind_grads(r.begin, bucket);
}

void ShardingReducer::reduce(size_t layer) {
  const Range r = layers_.at(layer);
  if (r.empty()) return;
  arena_->bind_grads(0, Tensor{});
  const Tensor bucket = bucket_.view().range(0, r.size());
  all_.all_reduce(bucket, ReduceOp::sum);
  const Range mine = intersect(r, own_);
  if (!mine.empty()) {
    const Tensor part = bucket.range(mine.begin - r.begin, mine.size());
    arena_->backend().copy(part, shard_.view().range(mine.begin - own_.begin, mine.size()));
  }
}

Tensor ShardingReducer::gradients(const Range& r) const {
  DT_CHECK(own_.contains(r), "gradients of [{}, {}) requested from the shard [{}, {})", r.begin, r.end, own_.begin,
           own_.end);
  return shard_.view().range(r.begin - own_.begin, r.size());
}

}  // namespace distrain
