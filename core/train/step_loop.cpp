#include "core/train/step_loop.hpp"

#include <chrono>
#include <cmath>

#include "core/base/rng.hpp"

namespace distrain {

namespace {

// A diverged run stops at once: going on would write NaN into metrics and checkpoints,
// and rotation would delete the good checkpoints for them. The strategy's finiteness
// verdict is the same on every replica and worker, so every rank stops at the same step.
[[noreturn]] void stop_for_nonfinite(const LossStats& stats, int64_t step, int64_t in_a_row,
                                    const std::string& last_checkpoint) {
  const std::string what = std::isfinite(stats.loss_sum) ? "the gradients are not finite (the loss is)"
                           : std::isnan(stats.loss_sum)  ? "the loss is not finite (nan)"
                                                         : "the loss is not finite (inf)";
  const std::string skipped =
      in_a_row > 1 ? fmt::format(" in {} steps in a row (train.on_nonfinite = \"skip_step\" skips at most {})", in_a_row,
                                 TrainSpec::kMaxSkippedInARow)
                   : "";
  throw UserError(fmt::format(
      "step {}: {}{}; lower optimizer.learning_rate or add optimizer.schedule.warmup_steps; the last finite checkpoint is {}",
      step, what, skipped, last_checkpoint.empty() ? "none (none was written)" : last_checkpoint));
}

}  // namespace

LoopPlan recipe_plan(const Recipe& recipe, int64_t batches_per_epoch) {
  const int64_t planned = recipe.train.epochs * batches_per_epoch;
  LoopPlan plan;
  plan.epochs = recipe.train.epochs;
  plan.batches_per_epoch = batches_per_epoch;
  plan.total_steps = recipe.train.steps > 0 ? std::min(recipe.train.steps, planned) : planned;
  plan.seed = recipe.seed;
  plan.on_nonfinite = recipe.train.skip_nonfinite_steps ? OnNonFinite::skip_step : OnNonFinite::stop;
  plan.clip_norm = static_cast<float>(recipe.optimizer.clip_norm);
  return plan;
}

TrainState StepLoop::run(const TrainState& start) {
  state_ = start;
  stopped_ = false;
  while (!plan_.complete(state_)) {
    const double lr = run_epoch_steps();
    // Stopped (a signal, a simulated crash): no epoch report, a rerun redoes the epoch from its
    // checkpoint. Ended by the observer (early stopping): the epoch so far is reported.
    if (stopped_ && !observer_.ends_run()) break;
    if (!end_epoch(lr) || observer_.ends_run()) break;
  }
  return state_;
}

// The steps of the current epoch from state_.batch_in_epoch, their figures read by the
// end; returns the last step's learning rate.
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
  read_figures();  // a stop or a short epoch left some unread
  return lr;
}

void StepLoop::step(const Batch& batch, double lr) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool skip = plan_.on_nonfinite == OnNonFinite::skip_step;
  strategy_.train_step(
      batch,
      StepInfo{state_.step, static_cast<float>(lr), derive_seed(plan_.seed, static_cast<uint64_t>(state_.step)), skip,
               plan_.clip_norm, 1.0f});
  ++state_.step;  // a skipped step's batch is used up too: a rerun goes on with the next, as this run does
  ++state_.batch_in_epoch;
  const bool read = observer_.needs_figures(state_) || state_.batch_in_epoch == plan_.batches_per_epoch ||
                    state_.step == plan_.total_steps || strategy_.unread_steps() == StepLedger::kCapacity ||
                    strategy_.unread_failure();  // reported (or counted as skipped) at once
  if (read) read_figures();
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state_.epoch_seconds += dt;
  stopped_ = observer_.after_step(state_, StepDone{dt, strategy_.last_step_times(), read});
}

// The figures of the steps since the last read into the epoch's; a non-finite step stops
// the run here (or is counted as skipped), before anything after it can save the variables.
void StepLoop::read_figures() {
  if (strategy_.unread_steps() == 0) return;
  for (const StepResult& r : strategy_.read_steps()) {
    const bool skipped = !r.finite && plan_.on_nonfinite != OnNonFinite::ignore;
    skipped_in_a_row_ = skipped ? skipped_in_a_row_ + 1 : 0;
    if (skipped && (plan_.on_nonfinite != OnNonFinite::skip_step || skipped_in_a_row_ > TrainSpec::kMaxSkippedInARow))
      stop_for_nonfinite(r.stats, r.step, skipped_in_a_row_, observer_.last_checkpoint());
    if (!skipped) state_.epoch_stats += r.stats;
    if (!skipped && r.grad_norm) state_.epoch_grad_norm_sum += *r.grad_norm, ++state_.epoch_grad_norms;
    observer_.step_read(r, skipped);
  }
}

// The epoch's report; then, when the epoch was completed (not cut by the step cap), the
// state moves to the next one. False when the run ends here.
bool StepLoop::end_epoch(double lr) {
  observer_.end_epoch(state_, lr);
  if (state_.batch_in_epoch != plan_.batches_per_epoch) return false;
  TrainState next;
  next.step = state_.step;
  next.epoch = state_.epoch + 1;
  state_ = next;
  observer_.next_epoch(state_, plan_.complete(state_));
  return true;
}

}  // namespace distrain
