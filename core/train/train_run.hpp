// TrainRun: what `distrain train` does around the steps StepLoop runs. Rank 0's progress,
// TensorBoard events and metrics.jsonl; validation at each epoch's end (and every
// train.validate_every_steps), judged for checkpoint.keep_best and train.early_stopping;
// checkpoints every
// checkpoint.every_steps and every_epochs, at the end and where a stop signal ends the run;
// the stop signal itself, agreed by every worker; TrainOptions' simulated crash; and the
// TrainSummary, with summary.json when the run is over.
#pragma once
#include <optional>
#include <utility>
#include <string>

#include "core/optim/lr_schedule.hpp"
#include "core/train/progress.hpp"
#include "core/train/step_loop.hpp"
#include "core/train/tensorboard_log.hpp"
#include "core/train/trainer.hpp"

namespace distrain {

class TrainRun final : public StepObserver {
 public:
  // `start`: the state the loop starts from; `resumed`: the checkpoint it was read from, or "".
  TrainRun(const Recipe& recipe, const TrainOptions& options, Strategy& strategy, const Dataset& test,
           const std::string& run_dir, const LoopPlan& plan, const LrSchedule& schedule, const TrainState& start,
           const std::string& resumed);

  void begin_epoch(const TrainState& state) override;
  bool needs_figures(const TrainState& state) const override;
  void step_read(const StepResult& result, bool skipped) override;
  bool after_step(const TrainState& state, const StepDone& step) override;
  void end_epoch(const TrainState& state, double lr) override;
  void next_epoch(const TrainState& state, bool last) override;
  std::string last_checkpoint() const override { return last_saved_; }
  bool ends_run() const override { return monitor_.stopped_early; }

  // After the loop, at `end`: the last checkpoint (none after a simulated crash) and the summary.
  TrainSummary finish(const TrainState& end);

 private:
  // checkpoint.every_steps says to save after the step `state` counts.
  bool checkpoint_due(const TrainState& state) const;
  void save(const TrainState& state);
  void save_to(const std::string& path, const TrainState& state);
  // The validation split's figures now, every worker taking part.
  LossStats validate();
  // A validation's figures against the best so far: keep_best's file, early stopping.
  void judge(const TrainState& state, const LossStats& validation);
  // train.validate_every_steps says to validate after the step `state` counts (epoch ends validate anyway).
  bool validation_due(const TrainState& state) const;
  std::string monitored() const;

  const Recipe& recipe_;
  const LrSchedule& schedule_;  // the learning rate of each step, for TensorBoard
  const TrainOptions& options_;
  Strategy& strategy_;
  const Dataset& test_;
  const bool test_on_devices_;  // validation's batches gathered on the devices (data.placement)
  const std::string run_dir_;
  const LoopPlan plan_;
  const bool writer_;
  Progress progress_;
  std::FILE* phase_out() const;
  std::optional<TensorBoardLog> tensorboard_;  // rank 0's, as metrics.jsonl
  std::string last_saved_;
  ValidationMonitor monitor_;  // written into every checkpoint's state
  std::optional<std::pair<int64_t, LossStats>> last_validation_;  // the step of the last mid-epoch validation, its figures
  TrainSummary summary_;
  double train_seconds_ = 0;
  int64_t trained_examples_ = 0;
  bool crashed_ = false;
};

}  // namespace distrain
