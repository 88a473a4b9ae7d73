#include "core/train/train_run.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/base/host_memory.hpp"
#include "core/base/log.hpp"
#include "core/io/checkpoint.hpp"
#include "core/base/stop_signal.hpp"
#include "core/train/data_placement.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/metrics_log.hpp"
#include "core/train/slow_phase.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

double per_second(int64_t count, double seconds) { return static_cast<double>(count) / std::max(seconds, 1e-9); }

// A language model's loss counts tokens: its rate is tokens a second.
ProgressOptions with_rate_unit(ProgressOptions options, const Dataset& data) {
  if (data.token_data()) options.rate_unit = "tok/s";
  return options;
}

}  // namespace

TrainRun::TrainRun(const Recipe& recipe, const TrainOptions& options, Strategy& strategy, const Dataset& test,
                   const std::string& run_dir, const LoopPlan& plan, const LrSchedule& schedule, const TrainState& start,
                   const std::string& resumed)
    : recipe_(recipe), schedule_(schedule), options_(options), strategy_(strategy), test_(test),
      test_on_devices_(recipe.train.validate && place_data_on_devices(recipe, strategy, test, DataUse::evaluation)),
      run_dir_(run_dir), plan_(plan), writer_(strategy.rank() == 0),
      progress_(writer_ ? options.out : nullptr, with_rate_unit(options.progress, test), plan.epochs, plan.batches_per_epoch,
                plan.total_steps),
      last_saved_(resumed),
      monitor_(start.monitor) {
  summary_.run_dir = run_dir;
  if (writer_ && recipe.train.tensorboard) tensorboard_.emplace(run_dir, start, recipe.train.tensorboard_every_steps, recipe.train.tensorboard_flush_seconds);
}

void TrainRun::begin_epoch(const TrainState& state) { progress_.begin_epoch(state.epoch); }

// Where a slow phase's lines go: the reporting rank's progress stream, unless progress is off.
std::FILE* TrainRun::phase_out() const {
  return writer_ && options_.progress.style != ProgressStyle::none ? options_.out : nullptr;
}

// A line of progress, a checkpoint (its TrainState carries the epoch's figures), and the
// simulated crash: after it, the figures it reports as the last step's are read.
bool TrainRun::needs_figures(const TrainState& state) const {
  return progress_.wants_figures(state.batch_in_epoch) || checkpoint_due(state) || state.step == options_.crash_after_step;
}

void TrainRun::step_read(const StepResult& result, bool skipped) {
  if (skipped) {
    log::info("step {}: the {} not finite; the step was skipped (train.on_nonfinite = \"skip_step\")", result.step,
              std::isfinite(result.stats.loss_sum) ? "gradients are" : "loss is");
    ++summary_.skipped_steps;
    return;
  }
  trained_examples_ += result.stats.count;
  if (tensorboard_) tensorboard_->step(result.step, result.stats, schedule_.at(result.step - 1), result.grad_norm);
}

bool TrainRun::after_step(const TrainState& state, const StepDone& step) {
  train_seconds_ += step.seconds;
  if (step.read)
    progress_.update(state.batch_in_epoch, state.epoch_stats, per_second(state.epoch_stats.count, state.epoch_seconds),
                     state.epoch_seconds);
  if (validation_due(state)) {
    const LossStats v = validate();
    last_validation_ = std::pair{state.step, v};
    progress_.validation(state.step, v);
    judge(state, v);
  }
  if (checkpoint_due(state) || (monitor_.stopped_early && state.step < plan_.total_steps)) save(state);
  if (monitor_.stopped_early) return true;
  if (state.step == options_.crash_after_step) {
    summary_.steps = state.step;
    crashed_ = true;
    return true;
  }
  // Every worker stops after the same step, whichever of them got the signal.
  if (state.step < plan_.total_steps) summary_.stopped_by = strategy_.max_over_workers(stop_signal());
  return summary_.stopped_by != 0;
}

// Validation, progress, metrics and the summary's figures of the epoch, whole or cut by
// the step cap.
void TrainRun::end_epoch(const TrainState& state, double lr) {
  EpochReport report{state.epoch + 1, state.step, state.batch_in_epoch, strategy_.epoch_total(state.epoch_stats), {},
                     lr, per_second(state.epoch_stats.count, state.epoch_seconds), state.epoch_seconds, std::nullopt};
  if (state.epoch_grad_norms) report.grad_norm = state.epoch_grad_norm_sum / static_cast<double>(state.epoch_grad_norms);
  if (recipe_.train.validate && last_validation_ && last_validation_->first == state.step) {
    report.validation = last_validation_->second;  // validated at this very step (validate_every_steps, then stopped)
  } else if (recipe_.train.validate) {
    report.validation = validate();
    judge(state, report.validation);
  }
  progress_.end_epoch(report);
  if (tensorboard_) tensorboard_->epoch(report);
  if (writer_) append_metrics(fs::path(run_dir_) / "metrics.jsonl", report, state.batch_in_epoch == plan_.batches_per_epoch);
  summary_.loss = report.train.mean_loss();
  summary_.accuracy = report.train.accuracy();
  summary_.validated = report.validation.count > 0;
  summary_.val_loss = report.validation.mean_loss();
  summary_.val_accuracy = report.validation.accuracy();
}

LossStats TrainRun::validate() {
  SlowPhase phase(phase_out(), fmt::format("validating on {} examples", test_.size()), [this] { progress_.interrupt(); });
  strategy_.prepare_for_read();
  return evaluate_dataset(strategy_, test_, recipe_.train.eval_batch, test_on_devices_);
}

// The figure keep_best and early stopping watch (restore_best makes them the same), or "".
std::string TrainRun::monitored() const {
  if (!recipe_.checkpoint.keep_best.empty()) return recipe_.checkpoint.keep_best;
  return recipe_.train.early_stopping.enabled ? recipe_.train.early_stopping.monitor : "";
}

bool TrainRun::validation_due(const TrainState& state) const {
  const int64_t every = recipe_.train.validate_every_steps;
  return every && state.step % every == 0 && state.batch_in_epoch != plan_.batches_per_epoch &&
         state.step != plan_.total_steps;
}

// Keras's rule: better when past the best by more than min_delta (lower loss, higher
// accuracy); the first validation is the first best. The figures are the same on every
// worker, so every worker decides alike.
void TrainRun::judge(const TrainState& state, const LossStats& validation) {
  const EarlyStoppingSpec& early = recipe_.train.early_stopping;
  const std::string best_of = monitored();
  if (best_of.empty()) return;
  const bool loss = best_of == "val_loss";
  const double value = loss ? validation.mean_loss() : validation.accuracy();
  const double margin = early.enabled ? early.min_delta : 0.0;
  const bool better = std::isnan(monitor_.best) || (loss ? value < monitor_.best - margin : value > monitor_.best + margin);
  if (better) {
    monitor_.best = value;
    monitor_.best_step = state.step;
    monitor_.waited = 0;
    if (!recipe_.checkpoint.keep_best.empty()) save_to((fs::path(run_dir_) / "best.h5").string(), state);
  } else {
    ++monitor_.waited;
  }
  if (early.enabled && monitor_.waited >= early.patience && state.step < plan_.total_steps) {
    monitor_.stopped_early = true;
    log::info("early stopping at step {}: {} has not improved by more than {:g} in {} validation(s); the best, {:.4f}, "
              "was at step {}", state.step, best_of, early.min_delta, monitor_.waited, monitor_.best, monitor_.best_step);
  }
}

void TrainRun::next_epoch(const TrainState& state, bool last) {
  if (recipe_.checkpoint.every_epochs && state.epoch % recipe_.checkpoint.every_epochs == 0 && !last) save(state);
}

TrainSummary TrainRun::finish(const TrainState& end) {
  if (crashed_) return summary_;  // as a crash would: nothing saved, nothing written
  if (monitor_.stopped_early && recipe_.train.early_stopping.restore_best) {
    const std::string best = (fs::path(run_dir_) / "best.h5").string();
    load_weights(best, strategy_.model_state());
    log::info("early stopping: the weights restored from {} (step {})", best, monitor_.best_step);
    last_saved_.clear();  // the end's checkpoint is written again, with the best weights
  }
  save(end);                      // the final state, or where a stop signal ended the run
  summary_.best = monitor_;
  summary_.monitored = monitored();
  summary_.last_checkpoint = last_saved_;
  summary_.steps = end.step;
  summary_.epochs = end.epoch;
  if (summary_.stopped_by) {  // not over: no summary.json (TensorBoard's file closes as we return)
    progress_.interrupt();
    return summary_;
  }
  summary_.train_seconds = train_seconds_;
  summary_.images_per_sec = per_second(trained_examples_, train_seconds_);
  if (writer_) write_summary(fs::path(run_dir_) / "summary.json", recipe_.name, summary_);
  return summary_;
}

bool TrainRun::checkpoint_due(const TrainState& state) const {
  const int64_t every = recipe_.checkpoint.every_steps;
  return every && state.step % every == 0 && state.step < plan_.total_steps;
}

void TrainRun::save(const TrainState& state) {
  const std::string path = (fs::path(run_dir_) / checkpoint_name(state.step)).string();
  if (path == last_saved_) return;  // a stop signal came at a periodic save
  save_to(path, state);
  if (writer_) prune_checkpoints(run_dir_, recipe_.checkpoint.keep);
  last_saved_ = path;
}

// The state with the validation record, as the checkpoint `path`.
void TrainRun::save_to(const std::string& path, const TrainState& state) {
  TrainState saved = state;
  saved.monitor = monitor_;
  const std::string name = fs::path(path).filename().string();
  SlowPhase phase(phase_out(), "saving " + name, [this] { progress_.interrupt(); });
  strategy_.prepare_for_read();     // every worker takes part, in both
  save_checkpoint(path, strategy_.model_state(), strategy_.optimizer_state(), saved, recipe_.resolved_text(), writer_,
                  test_.vocabulary ? test_.vocabulary->to_text() : "", test_.class_names);
  if (std::error_code ec; writer_) phase.set_outcome(fmt::format("saved {} ({})", name, format_bytes(static_cast<int64_t>(fs::file_size(path, ec)))));
}

}  // namespace distrain
