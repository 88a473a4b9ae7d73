// The gradient reducers of ZeRO (see core/model/gradient_reducer.hpp for the contract):
//   FusedAllReduce   stage 1: whole gradients, summed over every replica in one all-reduce
//                    at flush (as mirrored does);
//   ShardingReducer  stages 2 and 3: no gradient arena. Each layer's gradients go to a
//                    bucket during its backward, are summed over every replica as soon as
//                    the layer is done, and only the part in this replica's shard is kept.
// `all` is the communicator over every replica of the job; its rank is this replica's.
#pragma once
#include "core/comm/communicator.hpp"
#include "core/model/gradient_reducer.hpp"
#include "core/strategy/shard_layout.hpp"

namespace distrain {

class FusedAllReduce final : public FullGradients {
 public:
  explicit FusedAllReduce(Communicator& all) : all_(all) {}
  void flush() override { all_.all_reduce(whole(), ReduceOp::sum); }

 private:
  Communicator& all_;
};

class ShardingReducer final : public GradientReducer {
 public:
  explicit ShardingReducer(Communicator& all) : all_(all) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void zero() override;
  void open(size_t layer) override;
  void reduce(size_t layer) override;
  void flush() override {}  // every layer was reduced as it finished
  Tensor gradients(const Range& r) const override;
  int64_t bytes() const override { return static_cast<int64_t>(shard_.view().bytes() + bucket_.view().bytes()); }

 private:
  Communicator& all_;
  ParamArena* arena_ = nullptr;
  std::vector<Range> layers_;
  Range own_;
  Buffer shard_;   // (S) the reduced gradients of own_, zero padded
  Buffer bucket_;  // (largest layer) the layer in backward
};

}  // namespace distrain
