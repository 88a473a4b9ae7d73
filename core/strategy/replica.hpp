// Replica: one copy of the model on one device with its loss and input buffers; runs
// forward and backward on its slice of a global batch. Strategies own one or more.
#pragma once
#include <array>
#include <memory>

#include "core/io/recipe.hpp"
#include "core/model/loss.hpp"
#include "core/model/model.hpp"
#include "datasets/device_data.hpp"
#include "datasets/loader.hpp"

namespace distrain {

class Replica {
 public:
  // seams: the model's gatherer and reducer (see Model), the defaults if empty. tensor: the
  // ranks of a mesh's tensor axis this replica's layers split over (tensor parallelism).
  Replica(const Recipe& recipe, Backend& backend, ModelSeams seams = {}, Communicator* tensor = nullptr);

  // Forward and backward on `slice`; gradients accumulate into the model's arena, the
  // loss sum and correct count go to `stats` ((2,) on this device; StepLedger::loss_slot),
  // unread. grad_scale is 1 / (examples in the global batch), tokens for token data. An empty slice computes
  // nothing (nor writes stats) but still makes the model's gatherer and reducer calls
  // (they may be collective). With micro_batches > 1 the slice is cut into that many parts
  // as equal as can be, each a forward and backward of its own (gradient accumulation:
  // activations of one part at a time), their losses summed into `stats`; every replica
  // makes micro_batches passes, empty parts too, for the collectives' sake.
  void forward_backward(const ReplicaSlice& slice, float grad_scale, uint64_t step_seed, Tensor stats,
                        int64_t micro_batches = 1);
  // Loss and accuracy in inference mode; no gradients.
  LossStats evaluate(const ReplicaSlice& slice);

  // A copy of the non-trainable state (batch-norm moving statistics) before a step that
  // may be discarded, and putting it back.
  void keep_state();
  void restore_state();

  // Slices with indices are gathered from `data` (on this replica's device) from now on:
  // forward_backward's for training, evaluate's for evaluation.
  void use_device_data(DataUse use, std::shared_ptr<const DeviceData> data) {
    data_[static_cast<size_t>(use)] = std::move(data);
  }

  Model& model() { return *model_; }
  Backend& backend() { return backend_; }
  // Under sync_batch_norm: how batch norm sums its statistics over all replicas.
  void set_cross_replica_sum(CrossReplicaSum sum) { cross_replica_sum_ = std::move(sum); }

 private:
  // One forward and backward, its loss written to `stats` (nothing for an empty slice).
  void pass(const ReplicaSlice& slice, float grad_scale, uint64_t step_seed, Tensor stats);
  void upload(const ReplicaSlice& slice, DataUse use);

  Backend& backend_;
  std::unique_ptr<Model> model_;
  Loss loss_;
  Buffer images_, labels_;  // (n, input...) (token ids for a language model) and (n) or (n, T), reallocated when n changes
  Buffer rows_;             // (n) a slice's indices, with data_
  std::array<std::shared_ptr<const DeviceData>, 2> data_;  // by DataUse
  Buffer kept_state_;       // (state elements) see keep_state()
  Buffer micro_stats_;      // (2,) a micro-batch's loss sum and correct count
  CrossReplicaSum cross_replica_sum_;
  Communicator* tensor_;
  Tensor x_, y_;
};

}  // namespace distrain
