#include "core/train/trainer.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "core/base/log.hpp"
#include "core/base/rng.hpp"
#include "core/base/stop_signal.hpp"
#include "core/io/checkpoint.hpp"
#include "core/optim/lr_schedule.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/evaluate.hpp"
#include "core/train/metrics_log.hpp"
#include "core/train/preflight.hpp"
#include "core/train/progress.hpp"
#include "core/train/run_lock.hpp"
#include "core/train/tensorboard_log.hpp"

namespace distrain {

namespace fs = std::filesystem;

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


// The run folder, ready for this run: created and proven writable; worker 0 locks it
// before anything in it is written or deleted, clears partial saves a crash left, and
// with `fresh` the earlier run's checkpoints, metrics and events. The lock is held until
// the returned object goes.
std::unique_ptr<RunLock> open_run_folder(const std::string& run_dir, bool writer, bool fresh) {
  prepare_run_folder(run_dir, writer);
  if (!writer) return nullptr;
  auto lock = std::make_unique<RunLock>(run_dir);
  for (const auto& e : fs::directory_iterator(run_dir))
    if (is_partial_save(e.path().string())) fs::remove(e.path());
  if (fresh) {
    for (const auto& c : list_checkpoints(run_dir)) fs::remove(c);
    fs::remove(fs::path(run_dir) / "metrics.jsonl");
    fs::remove(fs::path(run_dir) / "summary.json");
    for (const auto& f : list_event_files(run_dir)) fs::remove(f);
  }
  return lock;
}

// Weights and optimizer from the newest checkpoint of the run folder (its state returned
// in `state`), else weights from checkpoint.init_from, else from the seed; then every
// replica and worker gets them. Returns the checkpoint resumed from, or "".
std::string resume_or_initialize(const Recipe& recipe, Strategy& strategy, const std::vector<std::string>& existing,
                                 TrainState& state) {
  std::string resumed;
  if (!existing.empty()) {
    resumed = existing.back();
    state = read_checkpoint_header(resumed).state;
    load_weights(resumed, strategy.model_state());
    load_optimizer(resumed, strategy.model().params(), strategy.optimizer_state());
    log::info("resuming from {} (step {}, epoch {}, batch {})", resumed, state.step, state.epoch + 1, state.batch_in_epoch);
  } else if (!recipe.checkpoint.init_from.empty()) {
    read_checkpoint_header(recipe.checkpoint.init_from);
    strategy.model_state().initialize(recipe.seed);  // variables the file lacks are an error: this only fills the arena
    load_weights(recipe.checkpoint.init_from, strategy.model_state());
    log::info("initialised weights from {}", recipe.checkpoint.init_from);
  } else {
    strategy.model_state().initialize(recipe.seed);
  }
  strategy.sync_replicas();
  return resumed;
}

LoaderSpec loader_spec(const Recipe& recipe, const Strategy& strategy) {
  LoaderSpec spec{recipe.strategy.per_replica_batch, strategy.num_replicas(), recipe.data.shuffle,
                  recipe.data.drop_remainder, recipe.seed};
  spec.first_replica = strategy.first_local_replica();
  spec.local_replicas = strategy.local_replicas();
  return spec;
}

// Under sync_batch_norm every replica takes part in the statistics of every step; a last
// partial batch smaller than the replica count would leave one without examples.
void check_last_batch(const Recipe& recipe, const Dataset& train, const Loader& loader, const Strategy& strategy) {
  const int64_t remainder = train.size() % loader.global_batch();
  DT_USER_CHECK(!recipe.strategy.sync_batch_norm || recipe.data.drop_remainder || remainder == 0 ||
                    remainder >= strategy.num_replicas(),
                "{}: the last batch of each epoch has {} examples for {} replicas, and sync_batch_norm needs at least one "
                "on each; set data.drop_remainder = true",
                recipe.file, remainder, strategy.num_replicas());
}

double per_second(int64_t count, double seconds) { return static_cast<double>(count) / std::max(seconds, 1e-9); }

// One run of the step loop over a prepared strategy, from `state` to the end, a step cap,
// a stop signal or a simulated crash.
class StepLoop {
 public:
  StepLoop(const Recipe& recipe, const TrainOptions& options, Strategy& strategy, const Splits& data, Loader& loader,
           const std::string& run_dir, TrainState state, const std::string& resumed)
      : recipe_(recipe), options_(options), strategy_(strategy), data_(data), loader_(loader), run_dir_(run_dir),
        writer_(strategy.rank() == 0), per_epoch_(loader.batches_per_epoch()),
        total_steps_(recipe.train.steps > 0 ? std::min(recipe.train.steps, recipe.train.epochs * per_epoch_)
                                            : recipe.train.epochs * per_epoch_),
        schedule_(recipe.optimizer.learning_rate, recipe.schedule, strategy.update_batch(loader.global_batch()),
                  total_steps_),
        progress_(writer_ ? options.out : nullptr, options.progress, recipe.train.epochs, per_epoch_),
        state_(state), last_saved_(resumed) {
    summary_.run_dir = run_dir;
  }

  bool complete() const { return state_.step >= total_steps_ || state_.epoch >= recipe_.train.epochs; }

  TrainSummary run() {
    if (writer_ && recipe_.train.tensorboard)
      tensorboard_.emplace(run_dir_, state_, recipe_.train.tensorboard_every_steps);
    while (state_.epoch < recipe_.train.epochs && state_.step < total_steps_) {
      const double lr = run_epoch_steps();
      if (crashed_) return summary_;
      if (summary_.stopped_by) break;  // no epoch report: a rerun redoes it from the checkpoint
      if (!end_epoch(lr)) break;
    }
    save();  // the final state, or where a stop signal ended the run
    return finish();
  }

 private:
  // The steps of the current epoch from state_.batch_in_epoch; returns the last step's
  // learning rate.
  double run_epoch_steps() {
    loader_.start(state_.epoch, state_.batch_in_epoch);
    progress_.begin_epoch(state_.epoch);
    double lr = schedule_.at(std::max<int64_t>(state_.step - 1, 0));  // resumed at its end, an epoch runs none
    while (state_.step < total_steps_) {
      std::optional<Batch> batch = loader_.next();
      if (!batch) break;
      lr = schedule_.at(state_.step);
      step(*batch, lr);
      if (recipe_.checkpoint.every_steps && state_.step % recipe_.checkpoint.every_steps == 0 && state_.step < total_steps_)
        save();
      if (state_.step == options_.crash_after_step) {
        summary_.steps = state_.step;
        crashed_ = true;
        return lr;
      }
      // Every worker stops after the same step, whichever of them got the signal.
      if (state_.step < total_steps_) summary_.stopped_by = strategy_.max_over_workers(stop_signal());
      if (summary_.stopped_by) break;
    }
    return lr;
  }

  void step(const Batch& batch, double lr) {
    const auto t0 = std::chrono::steady_clock::now();
    const LossStats stats = strategy_.train_step(
        batch, StepInfo{state_.step, static_cast<float>(lr), derive_seed(recipe_.seed, static_cast<uint64_t>(state_.step))});
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    check_loss_finite(stats, state_.step + 1, last_saved_);
    state_.epoch_stats += stats;
    state_.epoch_seconds += dt;
    train_seconds_ += dt;
    trained_examples_ += stats.count;
    ++state_.step;
    ++state_.batch_in_epoch;
    if (tensorboard_) tensorboard_->step(state_.step, stats);
    progress_.update(state_.batch_in_epoch, state_.epoch_stats, per_second(state_.epoch_stats.count, state_.epoch_seconds),
                     state_.epoch_seconds);
  }

  // Validation, progress, metrics and the epoch's checkpoint; false when the step cap
  // ended the run inside this epoch.
  bool end_epoch(double lr) {
    const bool epoch_done = state_.batch_in_epoch == per_epoch_;
    EpochReport report{state_.epoch + 1, state_.step, state_.batch_in_epoch, strategy_.epoch_total(state_.epoch_stats), {},
                       lr, per_second(state_.epoch_stats.count, state_.epoch_seconds), state_.epoch_seconds};
    if (recipe_.train.validate) {
      strategy_.prepare_for_read();
      report.validation = evaluate_dataset(strategy_, data_.test, recipe_.train.eval_batch);
    }
    progress_.end_epoch(report);
    if (tensorboard_) tensorboard_->epoch(report);
    if (writer_) append_metrics(fs::path(run_dir_) / "metrics.jsonl", report, epoch_done);
    summary_.loss = report.train.mean_loss();
    summary_.accuracy = report.train.accuracy();
    summary_.validated = report.validation.count > 0;
    summary_.val_loss = report.validation.mean_loss();
    summary_.val_accuracy = report.validation.accuracy();
    if (!epoch_done) return false;
    state_ = TrainState{state_.step, state_.epoch + 1, 0, {}, 0.0};
    const bool last = state_.epoch == recipe_.train.epochs || state_.step == total_steps_;
    if (recipe_.checkpoint.every_epochs && state_.epoch % recipe_.checkpoint.every_epochs == 0 && !last) save();
    return true;
  }

  void save() {
    const std::string path = (fs::path(run_dir_) / checkpoint_name(state_.step)).string();
    if (path == last_saved_) return;  // a stop signal came at a periodic save
    strategy_.prepare_for_read();     // every worker takes part, in both
    save_checkpoint(path, strategy_.model_state(), strategy_.optimizer_state(), state_, recipe_.resolved_text(), writer_);
    if (writer_) prune_checkpoints(run_dir_, recipe_.checkpoint.keep);
    last_saved_ = path;
  }

  TrainSummary finish() {
    summary_.last_checkpoint = last_saved_;
    summary_.steps = state_.step;
    summary_.epochs = state_.epoch;
    if (summary_.stopped_by) return summary_;  // not over: no summary.json (TensorBoard's file closes as we return)
    summary_.train_seconds = train_seconds_;
    summary_.images_per_sec = per_second(trained_examples_, train_seconds_);
    if (writer_) write_summary(fs::path(run_dir_) / "summary.json", recipe_.name, summary_);
    return summary_;
  }

  const Recipe& recipe_;
  const TrainOptions& options_;
  Strategy& strategy_;
  const Splits& data_;
  Loader& loader_;
  const std::string run_dir_;
  const bool writer_;
  const int64_t per_epoch_, total_steps_;
  const LrSchedule schedule_;
  Progress progress_;
  std::optional<TensorBoardLog> tensorboard_;  // rank 0's, as metrics.jsonl
  TrainState state_;
  std::string last_saved_;
  TrainSummary summary_;
  double train_seconds_ = 0;
  int64_t trained_examples_ = 0;
  bool crashed_ = false;
};

}  // namespace

void check_data_fits(const Recipe& recipe, const Model& model, const Dataset& data) {
  DT_USER_CHECK(model.input_shape() == data.example_shape,
                "{}: model.input_shape {} does not match the data's examples {} ({})", recipe.file,
                model.input_shape().str(), data.example_shape.str(), data.source);
  DT_USER_CHECK(model.output_shape()[0] >= data.num_classes,
                "{}: the model outputs {} values but the data has {} classes; make the last layer's units {}", recipe.file,
                model.output_shape()[0], data.num_classes, data.num_classes);
}

TrainSummary train(const Recipe& recipe, const TrainOptions& options) {
  const std::string run_dir = options.run_dir.empty() ? recipe.checkpoint.dir : options.run_dir;
  const Splits data = load_dataset(recipe.data, recipe.seed);
  auto strategy = make_strategy(recipe);
  check_data_fits(recipe, strategy->model(), data.train);
  check_memory_fits(recipe, *strategy);
  const auto existing = [&] { return options.fresh ? std::vector<std::string>{} : list_checkpoints(run_dir); };
  if (strategy->serves()) {  // a parameter server's server: serve until the workers are done
    const auto found = existing();
    strategy->serve(found.empty() ? "" : found.back(), recipe.checkpoint.init_from, recipe.seed);
    TrainSummary summary;
    summary.run_dir = run_dir;
    return summary;
  }

  // Worker 0 owns the run folder; every worker reads the same checkpoint to resume.
  const bool writer = strategy->rank() == 0;
  const auto lock = open_run_folder(run_dir, writer, options.fresh);
  TrainState state;
  const std::string resumed = resume_or_initialize(recipe, *strategy, existing(), state);
  if (writer && !resumed.empty()) trim_metrics(fs::path(run_dir) / "metrics.jsonl", state.epoch);

  Loader loader(data.train, loader_spec(recipe, *strategy));
  check_last_batch(recipe, data.train, loader, *strategy);
  const int64_t per_epoch = loader.batches_per_epoch();
  DT_USER_CHECK(state.batch_in_epoch <= per_epoch, "{}: the checkpoint is at batch {} of an epoch, which has {} batches "
                "under {}; resume with the recipe that wrote it", run_dir, state.batch_in_epoch, per_epoch, recipe.file);
  check_planned_steps(recipe, per_epoch);

  StepLoop loop(recipe, options, *strategy, data, loader, run_dir, state, resumed);
  if (loop.complete()) {
    log::info("{}: run already complete at step {} ({}); use --fresh to start over", run_dir, state.step,
              resumed.empty() ? "nothing to train" : resumed);
    TrainSummary summary;
    summary.run_dir = run_dir;
    summary.steps = state.step;
    summary.epochs = state.epoch;
    summary.last_checkpoint = resumed;
    return summary;
  }
  return loop.run();
}

}  // namespace distrain
