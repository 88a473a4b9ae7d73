// PipelineStage: this rank's stage of a pipeline (a run of consecutive layers, see
// core/model/stage_partition.hpp) and how it runs a step's micro-batches. With one stage
// and one micro-batch it is a plain replica (the mesh strategy always runs through it).
//
// A stage keeps one copy of its model per micro-batch in flight (the schedule says how
// many): copies share the parameters, the gradients and the batch-norm statistics (copy
// 0 owns them, as the strategy's seams say) but keep their own activations and what
// layers remember between forward and backward. Activations go to the next stage and
// input gradients to the previous one as messages on the pipeline axis; receives block,
// sends return at once and are waited for before their buffer is written again or reallocated.
//
// Every micro-batch's loss is divided by the global batch (the caller's grad_scale), so
// the accumulated gradients are one_device's; the loss and metrics are the last stage's
// sums, which the caller shares.
#pragma once
#include <memory>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/io/recipe.hpp"
#include "core/model/loss.hpp"
#include "core/model/model.hpp"
#include "core/strategy/pipeline_schedule.hpp"
#include "datasets/loader.hpp"

namespace distrain {

struct StagePlace {
  ModelPart part;                 // this stage's layers
  int stage = 0, stages = 1;
  int micro_batches = 1;
  PipeSchedule schedule = PipeSchedule::one_f_one_b;
  Communicator* pipe = nullptr;  // the pipeline axis (rank = stage); null with one stage
};

// Bytes of activations a stage holds at once for a per-replica batch of n: each copy's
// (one per micro-batch in flight) for its micro-batch, and the received inputs.
int64_t stage_activation_bytes(const Model& stage_model, const StagePlace& place, int64_t n);

class PipelineStage {
 public:
  PipelineStage(const Recipe& recipe, Backend& backend, ModelSeams seams, Communicator* tensor, const StagePlace& place);

  // Forward and backward of every micro-batch of `slice` in the schedule's order;
  // gradients accumulate into copy 0's storage. The last stage's loss sums (zero elsewhere).
  LossStats train(const ReplicaSlice& slice, float grad_scale, uint64_t seed);
  // The slice as one micro-batch in inference mode; the last stage's sums.
  LossStats evaluate(const ReplicaSlice& slice);

  // Batch-norm statistics before a step that may be discarded, and putting them back.
  void keep_state();
  void restore_state();

  Model& model() { return *copies_[0]; }
  Backend& backend() { return backend_; }
  bool last() const { return place_.stage == place_.stages - 1; }
  // Seconds of the last train() spent waiting for the neighbours (receiving, or for a
  // send to be taken), and in all.
  double idle_seconds() const { return idle_s_; }
  double step_seconds() const { return step_s_; }
  int64_t activation_bytes(int64_t n) const { return stage_activation_bytes(*copies_[0], place_, n); }

 private:
  struct Slot {  // one micro-batch in flight
    Buffer input, labels;
    int64_t act_send = 0, grad_send = 0;  // started sends of the copy's output and input gradient
  };
  struct Micro {
    int64_t offset = 0, count = 0;
  };
  std::vector<Micro> split(int64_t count) const;
  void forward(int micro, const Micro& m, const ReplicaSlice& slice, float grad_scale, uint64_t seed, LossStats& stats);
  void backward(int micro, uint64_t seed);
  Tensor input_of(Slot& slot, const Micro& m, const ReplicaSlice& slice, Model& copy);
  template <typename F>
  void waiting(F&& f);

  Backend& backend_;
  StagePlace place_;
  Communicator* tensor_;
  std::vector<std::unique_ptr<Model>> copies_;
  std::vector<Slot> slots_;
  Loss loss_;
  Buffer kept_state_;
  double idle_s_ = 0, step_s_ = 0;
};

}  // namespace distrain
