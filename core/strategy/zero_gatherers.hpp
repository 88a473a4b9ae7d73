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
// Under train.precision = "bf16" (ShardedValues::bf16) the shard is a float32 master, in host
// memory with strategy.offload_optimizer, and what the others get is its bf16 rounding: stages
// 1 and 2 keep whole values in bf16 (2 bytes a parameter) and all-gather them in bf16 (before
// the next step's first layer rather than after the update), stage 3 all-gathers each layer
// in bf16; a layer reads its values unpacked into a float32 bucket while it runs. Half the
// bytes on the wire, and the rounding a bf16 model reads anyway.
// `all` is the communicator over every replica of the job; its rank is this replica's.
#pragma once
#include "core/comm/communicator.hpp"
#include "core/model/param_gatherer.hpp"
#include "core/strategy/shard_layout.hpp"

namespace distrain {

// Bytes of `b` when it lies in host memory, else 0.
int64_t host_bytes_of(const Buffer& b);
// Elements of the float32 buffer GatherUpdates under bf16 unpacks a layer into: the largest
// of `layers`.
int64_t unpacked_size(const std::vector<Range>& layers);

struct ShardedValues {
  bool bf16 = false;            // bf16 copies beside float32 masters (see above)
  bool master_on_host = false;  // with bf16: the masters in host memory (offload_optimizer)
};

class GatherUpdates final : public ParamGatherer {
 public:
  GatherUpdates(Communicator& all, ShardedValues how = {}) : all_(all), how_(how) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void gather(size_t layer) override;
  void release(size_t) override;
  void before_update() override;
  void after_update() override;
  Tensor own() const override { return shard_.view(); }
  int64_t bytes() const override;
  bool collective() const override { return how_.bf16; }  // a step's first gather may share
  Binding binding() const override { return how_.bf16 ? Binding::rounded_copy : Binding::values; }
  int64_t host_bytes() const override { return host_bytes_of(shard_); }
  // bf16: a pipeline copy reads each layer unpacked into the same buffer (the copies run
  // one at a time); float32: the whole values, as any.
  std::unique_ptr<ParamGatherer> for_copy() override;
  // bf16: layer `layer`'s values unpacked to float32 (after sharing the masters if they
  // changed), valid until the next layer is unpacked; empty for a layer without values.
  Tensor unpacked(size_t layer);

 private:
  // bf16: every layer's chunks of the masters, rounded, all-gathered into packed_. At a
  // step's first gather, not after the update: whatever was written to the masters in
  // between (initial values, a checkpoint) is shared too.
  void share_packed();

  Communicator& all_;
  ShardedValues how_;
  Backend* backend_ = nullptr;
  ParamArena* arena_ = nullptr;
  std::vector<Range> layers_;
  ShardLayout layout_;
  Buffer values_;    // float32: (trainable arena + room for the last layer's padding), read
  Buffer packed_;    // bf16: the same in bf16
  Buffer staging_;   // bf16: (largest chunk) this replica's chunk of a layer, rounded
  Buffer unpacked_;  // bf16: (largest layer) the running layer's values in float32
  Buffer shard_;     // (layout size) the values this replica updates
  bool stale_ = false;  // bf16: the masters changed since packed_ was made from them
};

class ShardGatherer final : public ParamGatherer {
 public:
  ShardGatherer(Communicator& all, ShardedValues how = {}) : all_(all), how_(how) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void gather(size_t layer) override;
  void release(size_t) override { arena_->bind_values(0, Tensor{}); }
  void before_update() override {}
  void after_update() override {}
  Tensor own() const override { return shard_.view(); }
  int64_t bytes() const override;
  bool collective() const override { return true; }
  Binding binding() const override { return how_.bf16 ? Binding::rounded_copy : Binding::copy; }
  int64_t host_bytes() const override { return host_bytes_of(shard_); }

 private:
  Communicator& all_;
  ShardedValues how_;
  ParamArena* arena_ = nullptr;
  std::vector<Range> layers_;
  ShardLayout layout_;
  Buffer shard_;    // (layout size) this replica's parameters, zero padded
  Buffer bucket_;   // (largest layer, padded) the layer running
  Buffer packed_;   // bf16: the same in bf16, as gathered
  Buffer staging_;  // bf16: (largest chunk) this replica's chunk of the layer, rounded
};

}  // namespace distrain
