// The gradient reducers of ZeRO (see core/model/gradient_reducer.hpp for the contract). Both
// leave this replica's shard of the summed gradients (laid out by ShardLayout), one
// reduce_scatter per layer:
//   ScatterAtFlush   stage 1: whole gradients accumulate as in mirrored; at flush each
//                    layer is reduce-scattered into the shard;
//   ShardingReducer  stages 2 and 3: no gradient arena. Each layer's gradients go to a
//                    bucket during its backward and are reduce-scattered as soon as the
//                    layer is done.
// `all` is the communicator over every replica of the job; its rank is this replica's.
#pragma once
#include "core/comm/communicator.hpp"
#include "core/model/gradient_reducer.hpp"
#include "core/strategy/shard_layout.hpp"

namespace distrain {

class ScatterAtFlush final : public FullGradients {
 public:
  explicit ScatterAtFlush(Communicator& all) : all_(all) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void flush() override;
  Tensor own() const override { return shard_.view(); }
  int64_t bytes() const override;

 private:
  Communicator& all_;
  Backend* backend_ = nullptr;
  std::vector<Range> layers_;
  ShardLayout layout_;
  Buffer shard_;   // (layout size) the reduced gradients this replica owns
  Buffer bucket_;  // (largest layer, padded) one layer on its way to the reduce_scatter
};

class ShardingReducer final : public GradientReducer {
 public:
  explicit ShardingReducer(Communicator& all) : all_(all) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  // The shard sums each layer's reduce_scatters from zero: a step of several micro-batches
  // (train.accumulate_steps) reduces every layer once per micro-batch.
  void zero() override;
  void open(size_t layer) override;
  void reduce(size_t layer) override;
  void flush() override {}  // every layer was reduced as it finished
  Tensor own() const override { return shard_.view(); }
  int64_t bytes() const override {
    return static_cast<int64_t>(shard_.view().bytes() + bucket_.view().bytes() + reduced_.view().bytes());
  }

 private:
  Communicator& all_;
  ParamArena* arena_ = nullptr;
  std::vector<Range> layers_;
  ShardLayout layout_;
  Buffer shard_;   // (layout size) the reduced gradients this replica owns
  Buffer bucket_;  // (largest layer, padded) the layer in backward
  Buffer reduced_;  // (largest chunk) the layer's reduce_scatter, before it is added to the shard
};

// Layer l's chunks, n x C_l elements in `bucket`, summed over every replica into `chunk`
// (C_l elements): this replica's part of the layer. Shared by the reducers above.
void scatter_layer(Communicator& all, const ShardLayout& layout, size_t l, const Tensor& bucket, Tensor chunk);
// A zeroed bucket for any one layer of the layout.
Buffer layer_bucket(Backend& backend, const ShardLayout& layout);

}  // namespace distrain
