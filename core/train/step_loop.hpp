// StepLoop: the one place that sequences training steps (DESIGN.md "One training step").
// A step: the next batch from a BatchSource, the schedule's learning rate and the step's
// seed, Strategy::train_step, the run's TrainState; after some steps, the read of their
// figures (losses, the finiteness check: Strategy::read_steps), so that a GPU runs ahead
// of the host between reads; around the steps, the epochs and the step cap. What a run does between steps besides (progress, TensorBoard,
// metrics, validation, checkpoints and stop signals for `train`, TrainRun; the step times
// for `bench`, time_steps) is a StepObserver's, so that every command runs these steps.
#pragma once
#include <string>

#include "core/io/checkpoint.hpp"
#include "core/optim/lr_schedule.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/batch_source.hpp"

namespace distrain {

// What a step whose loss or gradients are not finite (nan, inf) does to the run, once its
// figures are read (Strategy::train_step says when its update was applied all the same).
enum class OnNonFinite {
  stop,       // an error naming the step and the last checkpoint, before anything saves it
  skip_step,  // the step is discarded and the run goes on, up to TrainSpec::kMaxSkippedInARow in a row
  ignore,     // go on: `bench` counts only the time
};

// The extent of a run, fixed before its first step.
struct LoopPlan {
  int64_t epochs = 1;
  int64_t batches_per_epoch = 0;
  int64_t total_steps = 0;  // the last step: train.steps where it caps the run, else epochs x batches_per_epoch
  uint64_t seed = 0;        // a step's seed (dropout masks) derives from this and the step
  OnNonFinite on_nonfinite = OnNonFinite::stop;
  float clip_norm = 0.0f;  // optimizer.clip_norm

  bool complete(const TrainState& s) const { return s.step >= total_steps || s.epoch >= epochs; }
};

// The plan of a recipe's run: train.epochs of `batches_per_epoch`, capped by train.steps.
LoopPlan recipe_plan(const Recipe& recipe, int64_t batches_per_epoch);

// A step as it ended.
struct StepDone {
  double seconds;           // Strategy::train_step, whole, and the read after it, if any
  const StepTimes& phases;  // where train_step's time went
  bool read = false;        // the figures of every step so far were read after it (StepObserver::step_read)
};

// Told what the loop does, in order; every call comes from the loop's thread.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual void begin_epoch(const TrainState& state) { (void)state; }
  // Whether the figures of the steps so far must be read once the step `state` counts is
  // queued (a line of progress, a checkpoint): the loop reads them then, and also at an
  // epoch's end and every StepLedger::kCapacity steps. The answer must depend on `state`
  // alone, the same on every worker: a read is collective.
  virtual bool needs_figures(const TrainState& state) const {
    (void)state;
    return false;
  }
  // Each step's figures as they are read, in order, before the after_step of the step
  // whose read brought them. `skipped`: discarded for a non-finite loss or gradient, not
  // counted in the epoch's figures.
  virtual void step_read(const StepResult& result, bool skipped) { (void)result, (void)skipped; }
  // After every step; `state` counts it, its epoch_stats the steps read so far. True ends
  // the run at once: no epoch report follows.
  virtual bool after_step(const TrainState& state, const StepDone& step) = 0;
  // The epoch ended, or the step cap ended the run inside it; `lr`: the last step's rate.
  virtual void end_epoch(const TrainState& state, double lr) { (void)state, (void)lr; }
  // An epoch was completed and `state` begins the next; `last`: the run is complete.
  virtual void next_epoch(const TrainState& state, bool last) { (void)state, (void)last; }
  // The checkpoint that a run whose loss stopped being finite can go back to, or "".
  virtual std::string last_checkpoint() const { return ""; }
  // Whether the run ends after the epoch just reported (early stopping), the same on every worker.
  virtual bool ends_run() const { return false; }
};

class StepLoop {
 public:
  StepLoop(Strategy& strategy, BatchSource& batches, const LoopPlan& plan, const LrSchedule& schedule,
           StepObserver& observer)
      : strategy_(strategy), batches_(batches), plan_(plan), schedule_(schedule), observer_(observer) {}

  // From `start` to the end of the plan, or until the observer ends the run; returns the
  // state reached.
  TrainState run(const TrainState& start);

 private:
  double run_epoch_steps();
  void step(const Batch& batch, double lr);
  void read_figures();
  bool end_epoch(double lr);

  Strategy& strategy_;
  BatchSource& batches_;
  const LoopPlan plan_;
  const LrSchedule& schedule_;
  StepObserver& observer_;
  TrainState state_;
  bool stopped_ = false;
  int64_t skipped_in_a_row_ = 0;
};

}  // namespace distrain
