// GradientReducer: where a model's parameter gradients accumulate and how they are summed
// over replicas. It is fed layer by layer as backward completes each one, so reduction can
// start while earlier layers still compute, and flushed before the update (flashlight's
// CoalescingReducer). ZeRO stages 2 and 3 reduce each layer and keep their shard here;
// tensor and pipeline parallelism will reduce over their own mesh axes here. The reducer
// owns the gradient storage and binds in the model's ParamArena where layers accumulate.
//
// Contract (every replica makes the same calls in the same order: they may be collective):
//   attach(arena, layers)  once, after the layout is known: allocate and bind.
//                          layers[i] is the arena range of layer i's trainable variables.
//   zero()                 before a step's backward: this step's gradients start at 0.
//   open(i), reduce(i)     around layer i's backward; in between, arena.grad() of layer
//                          i's trainable variables is valid (layers +=). After reduce(i)
//                          layer i's gradients are complete.
//   flush()                after the whole backward, before the update: own() holds the
//                          sum over every replica.
//   own()                  the gradients of what this replica updates: the whole trainable
//                          arena, or its shard (core/strategy/shard_layout.hpp).
//   bytes()                bytes of gradients this replica holds.
#pragma once
#include <cstdint>
#include <vector>

#include "core/base/range.hpp"
#include "core/comm/communicator.hpp"
#include "core/tensor/buffer.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual void attach(ParamArena& arena, const std::vector<Range>& layers) = 0;
  virtual void zero() = 0;
  virtual void open(size_t layer) = 0;
  virtual void reduce(size_t layer) = 0;
  virtual void flush() = 0;
  virtual Tensor own() const = 0;
  virtual int64_t bytes() const = 0;
};

// The whole gradient arena, bound once; reducing it is left to the strategy (one_device has
// nothing to reduce; mirrored and central storage reduce the whole arena after backward).
class FullGradients : public GradientReducer {
 public:
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void zero() override;
  void open(size_t) override {}
  void reduce(size_t) override {}
  void flush() override {}
  Tensor own() const override { return grads_.view(); }
  int64_t bytes() const override { return static_cast<int64_t>(grads_.view().bytes()); }

 protected:
  Tensor whole() const { return grads_.view(); }

 private:
  Backend* backend_ = nullptr;
  Buffer grads_;  // (trainable arena)
};

// The whole gradient arena, summed over `all` (every data-parallel replica) in one
// collective at flush: mirrored's reduction, and a mesh's over its data axis.
class AllReduceAtFlush final : public FullGradients {
 public:
  explicit AllReduceAtFlush(Communicator& all) : all_(all) {}
  void flush() override {
    if (all_.size() > 1 && whole().numel()) all_.all_reduce(whole(), ReduceOp::sum);
  }

 private:
  Communicator& all_;
};

}  // namespace distrain
