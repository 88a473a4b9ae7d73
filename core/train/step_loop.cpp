#include "core/train/step_loop.hpp"

#include <chrono>
#include <cmath>

#include "core/base/rng.hpp"

namespace distrain {

namespace {

// A diverged run stops at once: going on would write NaN into metrics and checkpoints,
// and rotation would delete the good checkpoints for them. The loss is summed over every
// replica and worker before it gets here, so every rank stops at the same step.
void check_loss_finite(const LossStats& stats, int64_t step, const std::string& last_checkpoint) {
  if (std::isfinite(stats.loss_sum)) return;
  throw UserError(fmt::format(
      "step {}: the loss is not finite ({}); lower optimizer.learning_rate or add optimizer.schedule.warmup_steps; "
      "the last finite checkpoint is {}",
      step, std::isnan(stats.loss_sum) ? "nan" : "inf", last_checkpoint.empty() ? "none (none was written)" : last_checkpoint));
}

}  // namespace

LoopPlan recipe_plan(const Recipe& recipe, int64_t batches_per_epoch) {
  const int64_t planned = recipe.train.epochs * batches_per_epoch;
  LoopPlan plan;
  plan.epochs = recipe.train.epochs;
  plan.batches_per_epoch = batches_per_epoch;
  plan.total_steps = recipe.train.steps > 0 ? std::min(recipe.train.steps, planned) : planned;
  plan.seed = recipe.seed;
  return plan;
}

TrainState StepLoop::run(const TrainState& start) {
  state_ = start;
  stopped_ = false;
  while (!plan_.complete(state_)) {
    const double lr = run_epoch_steps();
    if (stopped_ || !end_epoch(lr)) break;  // stopped: no epoch report, a rerun redoes the epoch from its checkpoint
  }
  return state_;
}

// The steps of the current epoch from state_.batch_in_epoch; returns the last step's
// learning rate.
double StepLoop::run_epoch_steps() {
  batches_.start(state_.epoch, state_.batch_in_epoch);
  observer_.begin_epoch(state_);
  double lr = schedule_.at(std::max<int64_t>(state_.step - 1, 0));  // resumed at its end, an epoch runs none
  while (state_.step < plan_.total_steps && !stopped_) {
    const Batch* batch = batches_.next();
    if (!batch) break;
    lr = schedule_.at(state_.step);
    step(*batch, lr);
  }
  return lr;
}

void StepLoop::step(const Batch& batch, double lr) {
  const auto t0 = std::chrono::steady_clock::now();
  const LossStats stats = strategy_.train_step(
      batch, StepInfo{state_.step, static_cast<float>(lr), derive_seed(plan_.seed, static_cast<uint64_t>(state_.step))});
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (plan_.on_nonfinite == OnNonFinite::stop) check_loss_finite(stats, state_.step + 1, observer_.last_checkpoint());
  state_.epoch_stats += stats;
  state_.epoch_seconds += dt;
  ++state_.step;
  ++state_.batch_in_epoch;
  stopped_ = observer_.after_step(state_, StepDone{stats, dt, strategy_.last_step_times()});
}

// The epoch's report; then, when the epoch was completed (not cut by the step cap), the
// state moves to the next one. False when the run ends here.
bool StepLoop::end_epoch(double lr) {
  observer_.end_epoch(state_, lr);
  if (state_.batch_in_epoch != plan_.batches_per_epoch) return false;
  state_ = TrainState{state_.step, state_.epoch + 1, 0, {}, 0.0};
  observer_.next_epoch(state_, plan_.complete(state_));
  return true;
}

}  // namespace distrain
