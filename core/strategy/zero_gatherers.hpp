// The parameter gatherers of ZeRO (see core/model/param_gatherer.hpp for the contract). Each
// replica updates only its shard (laid out by ShardLayout); what differs is when the others'
// shards reach it:
//   GatherUpdates  stages 1 and 2: whole values, which the layers read. Before the update the
//                  shard is taken from them; after it each layer's chunks are all-gathered
//                  straight back into them (layer by layer in arena order: a layer's last,
//                  padding chunk may spill into the next layer's range, which that layer's
//                  own gather then rewrites; past the last layer there is room for it).
//   ShardGatherer  stage 3: no parameter arena. A layer's parameters are all-gathered into a
//                  bucket just before its forward and its backward and released after; the
//                  update touches only the shard, so nothing happens after it.
// `all` is the communicator over every replica of the job; its rank is this replica's.
#pragma once
#include "core/comm/communicator.hpp"
#include "core/model/param_gatherer.hpp"
#include "core/strategy/shard_layout.hpp"

namespace distrain {

class GatherUpdates final : public ParamGatherer {
 public:
  explicit GatherUpdates(Communicator& all) : all_(all) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void gather(size_t) override {}
  void release(size_t) override {}
  void before_update() override;
  void after_update() override;
  Tensor own() const override { return shard_.view(); }
  int64_t bytes() const override { return static_cast<int64_t>(values_.view().bytes() + shard_.view().bytes()); }
  bool collective() const override { return false; }

 private:
  Communicator& all_;
  Backend* backend_ = nullptr;
  std::vector<Range> layers_;
  ShardLayout layout_;
  Buffer values_;  // (trainable arena + room for the last layer's padding) what the layers read
  Buffer shard_;   // (layout size) the values this replica updates
};

class ShardGatherer final : public ParamGatherer {
 public:
  explicit ShardGatherer(Communicator& all) : all_(all) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void gather(size_t layer) override;
  void release(size_t) override { arena_->bind_values(0, Tensor{}); }
  void before_update() override {}
  void after_update() override {}
  Tensor own() const override { return shard_.view(); }
  int64_t bytes() const override { return static_cast<int64_t>(shard_.view().bytes() + bucket_.view().bytes()); }
  bool collective() const override { return true; }

 private:
  Communicator& all_;
  ParamArena* arena_ = nullptr;
  std::vector<Range> layers_;
  ShardLayout layout_;
  Buffer shard_;   // (layout size) this replica's parameters, zero padded
  Buffer bucket_;  // (largest layer, padded) the layer running
};

}  // namespace distrain
