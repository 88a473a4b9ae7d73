// The parameter gatherers of ZeRO (see core/model/param_gatherer.hpp for the contract).
// Each replica updates only its shard; what differs is when the others' shards reach it:
//   AllGatherUpdates  stage 1: whole values; after the update the shards are all-gathered;
//   SumUpdates        stage 2: whole values; after the update each replica zeroes what it
//                     does not own and the values are summed over replicas (exact: one
//                     owner per element), which needs no gather buffers;
//   ShardGatherer     stage 3: no parameter arena. A layer's parameters are gathered into
//                     a bucket just before its forward and its backward and released after;
//                     the update touches only the shard, so nothing happens after it.
// `all` is the communicator over every replica of the job; its rank is this replica's.
#pragma once
#include "core/comm/communicator.hpp"
#include "core/model/param_gatherer.hpp"
#include "core/strategy/shard_layout.hpp"

namespace distrain {

class AllGatherUpdates final : public FullValues {
 public:
  explicit AllGatherUpdates(Communicator& all) : all_(all) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void after_update() override;

 private:
  Communicator& all_;
  Backend* backend_ = nullptr;
  Range own_;
  Buffer send_, gathered_;  // (S) own range, zero padded; (S x replicas)
};

class SumUpdates final : public FullValues {
 public:
  explicit SumUpdates(Communicator& all) : all_(all) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void after_update() override;

 private:
  Communicator& all_;
  Backend* backend_ = nullptr;
  Range own_;
};

class ShardGatherer final : public ParamGatherer {
 public:
  explicit ShardGatherer(Communicator& all) : all_(all) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void gather(size_t layer) override;
  void release(size_t) override { arena_->bind_values(0, Tensor{}); }
  void after_update() override {}
  Tensor values(const Range& r) const override;
  int64_t bytes() const override { return static_cast<int64_t>(shard_.view().bytes() + bucket_.view().bytes()); }
  bool collective() const override { return true; }

 private:
  Communicator& all_;
  ParamArena* arena_ = nullptr;
  std::vector<Range> layers_;
  Range own_;
  Buffer shard_;   // (S) own parameters, zero padded
  Buffer bucket_;  // (largest layer) the layer running
};

}  // namespace distrain
