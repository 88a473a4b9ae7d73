#include "core/strategy/zero_gatherers.hpp"

#include <algorithm>

#include "core/backend/backend.hpp"

namespace distrain {

void AllGatherUpdates::attach(ParamArena& arena, const std::vector<Range>& layers) {
  FullValues::attach(arena, layers);
  backend_ = &arena.backend();
  const ShardLayout shards(arena.trainable_arena_size(), all_.size());
  own_ = shards.own(all_.rank());
  send_ = Buffer(*backend_, Shape{shards.shard});
  gathered_ = Buffer(*backend_, Shape{shards.shard * all_.size()});
  backend_->fill(send_.view(), 0.0f);
}

void AllGatherUpdates::after_update() {
  backend_->copy(values(own_), send_.view().range(0, own_.size()));
  all_.all_gather(send_.view(), gathered_.view());
  backend_->copy(gathered_.view().range(0, whole().numel()), whole());
}

void SumUpdates::attach(ParamArena& arena, const std::vector<Range>& layers) {
  FullValues::attach(arena, layers);
  backend_ = &arena.backend();
  own_ = ShardLayout(arena.trainable_arena_size(), all_.size()).own(all_.rank());
}

void SumUpdates::after_update() {
  const Tensor values = whole();
  const int64_t n = values.numel();
  if (own_.begin > 0) backend_->fill(values.range(0, own_.begin), 0.0f);
  if (own_.end < n) backend_->fill(values.range(own_.end, n - own_.end), 0.0f);
  all_.all_reduce(values, ReduceOp::sum);
}

void ShardGatherer::attach(ParamArena& arena, const std::vector<Range>& layers) {
  arena_ = &arena;
  layers_ = layers;
  const ShardLayout shards(arena.trainable_arena_size(), all_.size());
  own_ = shards.own(all_.rank());
  int64_t largest = 0;
  for (const Range& r : layers) largest = std::max(largest, r.size());
  shard_ = Buffer(arena.backend(), Shape{shards.shard});
  bucket_ = Buffer(arena.backend(), Shape{largest});
  if (!shard_.empty()) arena.backend().fill(shard_.view(), 0.0f);
  arena.bind_values(0, Tensor{});
}

// The layer's range from its owners: each replica adds its part, zeros elsewhere; the sum
// is exact because every element has one owner.
void ShardGatherer::gather(size_t layer) {
  const Range r = layers_.at(layer);
  if (r.empty()) return;
  Backend& be = arena_->backend();
  const Tensor bucket = bucket_.view().range(0, r.size());
  be.fill(bucket, 0.0f);
  const Range mine = intersect(r, own_);
  if (!mine.empty())
    be.copy(shard_.view().range(mine.begin - own_.begin, mine.size()), bucket.range(mine.begin - r.begin, mine.size()));
  all_.all_reduce(bucket, ReduceOp::sum);
  arena_->bind_values(r.begin, bucket);
}

Tensor ShardGatherer::values(const Range& r) const {
  DT_CHECK(own_.contains(r), "values of [{}, {}) requested from the shard [{}, {})", r.begin, r.end, own_.begin, own_.end);
  return shard_.view().range(r.begin - own_.begin, r.size());
}

}  // namespace distrain
