// ParamGatherer: how a model's trainable values reach its layers; the seam through which a
// strategy acts on parameters inside forward and backward. ZeRO stage 3 gathers a layer's
// parameters from their owners just before the layer runs and releases them after; tensor
// and pipeline parallelism will fetch or slice their parameters here too. The gatherer owns
// the storage of the values it keeps and binds in the model's ParamArena what layers read.
//
// Contract (every replica makes the same calls in the same order: they may be collective):
//   attach(arena, layers)  once, after the layout is known: allocate (zeroed) and bind.
//                          layers[i] is the arena range of layer i's trainable variables.
//   gather(i), release(i)  around layer i's forward and around its backward; in between,
//                          arena.value() of layer i's trainable variables is valid.
//   before_update()        once gradients are reduced: own() holds the current values.
//   after_update()         once the optimizer has updated own(): each replica gets what it
//                          needs of every replica's update for the next step.
//   own()                  the values this replica updates: the whole trainable arena, or
//                          its shard (laid out as core/strategy/shard_layout.hpp says).
//   bytes()                bytes of trainable values this replica holds.
//   collective()           gather/release communicate, so a replica without examples must
//                          still make them (Model::forward_without_examples).
//   binding()              what gather(i) binds: the values themselves, bound whole (under
//                          bf16 the model binds a rounded copy in their place); a float32
//                          copy of layer i's values (zero stage 3 in float32); or a copy
//                          already rounded to bf16 (zero and the mesh's shard_optimizer
//                          under bf16).
//   host_bytes()           bytes of own() kept in host memory (offloaded masters).
//   for_copy()             a gatherer for another copy of the same model on this replica (a
//                          pipeline's micro-batch in flight, run one at a time with this
//                          one) that reads what this one holds; null: the copy binds the
//                          whole values this one bound (the default).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/base/range.hpp"
#include "core/tensor/buffer.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

enum class Binding { values, copy, rounded_copy };

class ParamGatherer {
 public:
  virtual ~ParamGatherer() = default;
  virtual void attach(ParamArena& arena, const std::vector<Range>& layers) = 0;
  virtual void gather(size_t layer) = 0;
  virtual void release(size_t layer) = 0;
  virtual void before_update() = 0;
  virtual void after_update() = 0;
  virtual Tensor own() const = 0;
  virtual int64_t bytes() const = 0;
  virtual bool collective() const = 0;
  virtual Binding binding() const { return Binding::values; }
  virtual int64_t host_bytes() const { return 0; }
  virtual std::unique_ptr<ParamGatherer> for_copy() { return nullptr; }
};

// Every replica keeps all values, bound once for the whole arena; nothing happens per layer
// or after the update (replicated strategies keep replicas equal by reducing gradients).
class FullValues : public ParamGatherer {
 public:
  void attach(ParamArena& arena, const std::vector<Range>& layers) override;
  void gather(size_t) override {}
  void release(size_t) override {}
  void before_update() override {}
  void after_update() override {}
  Tensor own() const override { return values_.view(); }
  int64_t bytes() const override { return static_cast<int64_t>(values_.view().bytes()); }
  bool collective() const override { return false; }

 protected:
  Tensor whole() const { return values_.view(); }

 private:
  Buffer values_;  // (trainable arena)
};

}  // namespace distrain
