// Replica: the one model runner. It holds a copy of the model (or of one pipeline stage's
// layers) on one device with its loss and input buffers, and runs a step's forward and
// backward passes on its slice of the global batch; every strategy runs its model through it.
//
// A slice runs as micro-batches (one by default): train.accumulate_steps for gradient
// accumulation, strategy.micro_batches on the mesh. With one stage they run one after
// another; as a stage of a pipeline (core/model/stage_partition.hpp) they run in the
// schedule's order (core/strategy/pipeline_schedule.hpp), activations going to the next
// stage and input gradients to the previous one as messages on the pipeline axis
// (receives block; sends return at once and are waited for before their buffer is
// written again or reallocated). A plain replica is stage 0 of 1 with one micro-batch.
//
// A stage keeps one copy of its model per micro-batch in flight (one on a single stage):
// copies share the parameters, the gradients and the batch-norm statistics (copy 0 owns
// them, as the strategy's seams say) but keep their own activations and what layers
// remember between forward and backward.
//
// Every micro-batch's loss is divided by the whole global batch (the caller's grad_scale),
// so the accumulated gradients are one_device's. The loss sums go to a slot on the device
// (StepLedger::loss_slot), written by the last stage (zeros on the others).
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/io/recipe.hpp"
#include "core/model/loss.hpp"
#include "core/model/model.hpp"
#include "core/strategy/pipeline_schedule.hpp"
#include "datasets/device_data.hpp"
#include "datasets/loader.hpp"

namespace distrain {

// Where a replica sits in a pipeline and how many micro-batches a slice runs as.
struct StagePlace {
  ModelPart part;                 // this stage's layers (all by default)
  int stage = 0, stages = 1;
  int micro_batches = 1;
  PipeSchedule schedule = PipeSchedule::one_f_one_b;
  Communicator* pipe = nullptr;  // the pipeline axis (rank = stage); null with one stage
};

// Bytes of activations a stage holds at once for a per-replica batch of n: each copy's
// (one per micro-batch in flight) for its micro-batch, and the received inputs.
int64_t stage_activation_bytes(const Model& stage_model, const StagePlace& place, int64_t n);

// This rank's place on a tensor axis of `size` as the recipe asks: sequence parallelism,
// and vocabulary parallelism where the loss allows it (sparse cross-entropy from logits).
// Throws UserError naming the file where strategy.vocab_parallel = true and it does not.
TensorGroup tensor_group_of(const Recipe& recipe, int rank, int size);
// Why the recipe keeps the vocabulary whole whatever its model (strategy.vocab_parallel =
// false, or a loss that cannot combine class slices), or "".
std::string vocabulary_kept_whole(const Recipe& recipe);

class Replica {
 public:
  // seams: the model's gatherer and reducer (see Model), the defaults if empty. tensor: the
  // ranks of a mesh's tensor axis this replica's layers split over (tensor parallelism).
  // place: a pipeline stage; without one, the whole model with train.accumulate_steps
  // micro-batches.
  Replica(const Recipe& recipe, Backend& backend, ModelSeams seams = {}, Communicator* tensor = nullptr,
          std::optional<StagePlace> place = std::nullopt);

  // Forward and backward of every micro-batch of `slice`; gradients accumulate into the
  // model's arena (copy 0's), the loss sum and correct count go to `stats` ((2,) on this
  // device), unread. grad_scale is 1 / (labels in the global batch: examples, or tokens).
  // The slice is cut into micro-batches as equal as can be; an empty one (a slice smaller
  // than their number, or empty) computes nothing but still makes the model's gatherer and
  // reducer calls, which may be collective.
  void forward_backward(const ReplicaSlice& slice, float grad_scale, uint64_t step_seed, Tensor stats);
  // Loss and accuracy in inference mode, the slice as one micro-batch; no gradients. The
  // last stage's sums (none elsewhere).
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

  Model& model() { return *copies_[0]; }
  Backend& backend() { return backend_; }
  bool first() const { return place_.stage == 0; }
  bool last() const { return place_.stage == place_.stages - 1; }
  // Under sync_batch_norm: how batch norm sums its statistics over all replicas.
  void set_cross_replica_sum(CrossReplicaSum sum) { cross_replica_sum_ = std::move(sum); }
  // Seconds of the last forward_backward() spent waiting for the pipeline neighbours
  // (receiving, or for a send to be taken), and in all.
  double idle_seconds() const { return idle_s_; }
  double step_seconds() const { return step_s_; }
  int64_t activation_bytes(int64_t n) const { return stage_activation_bytes(*copies_[0], place_, n); }

 private:
  struct Slot {  // one micro-batch in flight: its copy's input, labels and sends
    Buffer input, labels, rows;  // rows: a slice's indices into device data
    int64_t act_send = 0, grad_send = 0;
  };
  void check_ends(const Recipe& recipe) const;
  void forward(int micro, const ReplicaSlice& part, float grad_scale, uint64_t seed, Tensor stats);
  void backward(int micro, const ReplicaSlice& part, uint64_t seed);
  // The micro-batch's input: its data on the first stage, the previous stage's output after it.
  Tensor input_of(Slot& slot, const ReplicaSlice& part, const Model& copy, DataUse use);
  void upload(Slot& slot, const ReplicaSlice& part, DataUse use);
  Tensor labels_of(Slot& slot, const ReplicaSlice& part);
  uint64_t micro_seed(uint64_t step_seed, int micro) const;
  void wait_sends(Slot& slot);
  template <typename F>
  void waiting(F&& f);

  Backend& backend_;
  StagePlace place_;
  Communicator* tensor_;
  std::vector<std::unique_ptr<Model>> copies_;
  std::vector<Slot> slots_;  // per copy
  Loss loss_;
  std::array<std::shared_ptr<const DeviceData>, 2> data_;  // by DataUse
  Buffer kept_state_;   // (state elements) see keep_state()
  Buffer micro_stats_;  // (2,) a micro-batch's loss sum and correct count
  CrossReplicaSum cross_replica_sum_;
  double idle_s_ = 0, step_s_ = 0;
};

}  // namespace distrain
