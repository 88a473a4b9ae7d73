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
  using clock = std::chrono::steady_clock;
  const std::string run_dir = options.run_dir.empty() ? recipe.checkpoint.dir : options.run_dir;
  const fs::path metrics_file = fs::path(run_dir) / "metrics.jsonl";

  const Splits data = load_dataset(recipe.data, recipe.seed);
  auto strategy = make_strategy(recipe);
  Model& model = strategy->model();
  check_data_fits(recipe, model, data.train);
  check_memory_fits(recipe, *strategy);
  if (strategy->serves()) {  // a parameter server's server: serve until the workers are done
    const auto found = options.fresh ? std::vector<std::string>{} : list_checkpoints(run_dir);
    strategy->serve(found.empty() ? "" : found.back(), recipe.checkpoint.init_from, recipe.seed);
    TrainSummary summary;
    summary.run_dir = run_dir;
    return summary;
  }

  // Worker 0 owns the run folder; every worker reads the same checkpoint to resume.
  const bool writer = strategy->rank() == 0;
  prepare_run_folder(run_dir, writer);
  std::optional<RunLock> lock;  // before anything in the folder is written or deleted; held until we return
  if (writer) lock.emplace(run_dir);
  if (writer)
    for (const auto& e : fs::directory_iterator(run_dir))
      if (is_partial_save(e.path().string())) fs::remove(e.path());  // a save cut short by a crash
  if (options.fresh && writer) {
    for (const auto& c : list_checkpoints(run_dir)) fs::remove(c);
    fs::remove(metrics_file);
    fs::remove(fs::path(run_dir) / "summary.json");
    for (const auto& f : list_event_files(run_dir)) fs::remove(f);
  }

  TrainState state;
  const auto existing = options.fresh ? std::vector<std::string>{} : list_checkpoints(run_dir);
  if (!existing.empty()) {
    const std::string& newest = existing.back();
    const CheckpointHeader header = read_checkpoint_header(newest);
    load_weights(newest, strategy->model_state());
    load_optimizer(newest, model.params(), strategy->optimizer_state());
    state = header.state;
    if (writer) trim_metrics(metrics_file, state.epoch);
    log::info("resuming from {} (step {}, epoch {}, batch {})", newest, state.step, state.epoch + 1, state.batch_in_epoch);
  } else if (!recipe.checkpoint.init_from.empty()) {
    read_checkpoint_header(recipe.checkpoint.init_from);
    strategy->model_state().initialize(recipe.seed);  // variables the file lacks are an error: this only fills the arena
    load_weights(recipe.checkpoint.init_from, strategy->model_state());
    log::info("initialised weights from {}", recipe.checkpoint.init_from);
  } else {
    strategy->model_state().initialize(recipe.seed);
  }
  strategy->sync_replicas();

  LoaderSpec loader_spec{recipe.strategy.per_replica_batch, strategy->num_replicas(), recipe.data.shuffle,
                         recipe.data.drop_remainder, recipe.seed};
  loader_spec.first_replica = strategy->first_local_replica();
  loader_spec.local_replicas = strategy->local_replicas();
  Loader loader(data.train, loader_spec);
  // Under sync_batch_norm every replica takes part in the statistics of every step; a
  // last partial batch smaller than the replica count would leave one without examples.
  const int64_t remainder = data.train.size() % loader.global_batch();
  DT_USER_CHECK(!recipe.strategy.sync_batch_norm || recipe.data.drop_remainder || remainder == 0 ||
                    remainder >= strategy->num_replicas(),
                "{}: the last batch of each epoch has {} examples for {} replicas, and sync_batch_norm needs at least one "
                "on each; set data.drop_remainder = true",
                recipe.file, remainder, strategy->num_replicas());
  const int64_t per_epoch = loader.batches_per_epoch();
  DT_USER_CHECK(state.batch_in_epoch <= per_epoch, "{}: the checkpoint is at batch {} of an epoch, which has {} batches "
                "under {}; resume with the recipe that wrote it", run_dir, state.batch_in_epoch, per_epoch, recipe.file);
  check_planned_steps(recipe, per_epoch);
  const int64_t planned = recipe.train.epochs * per_epoch;
  const int64_t total_steps = recipe.train.steps > 0 ? std::min(recipe.train.steps, planned) : planned;
  const LrSchedule schedule(recipe.optimizer.learning_rate, recipe.schedule, strategy->update_batch(loader.global_batch()),
                            total_steps);
  std::FILE* out = writer ? options.out : nullptr;
  Progress progress(out, options.progress, recipe.train.epochs, per_epoch);

  TrainSummary summary;
  summary.run_dir = run_dir;
  std::string last_saved = existing.empty() ? "" : existing.back();
  auto save = [&] {
    const std::string path = (fs::path(run_dir) / checkpoint_name(state.step)).string();
    if (path == last_saved) return;  // a stop signal came at a periodic save
    strategy->prepare_for_read();  // every worker takes part, in both
    save_checkpoint(path, strategy->model_state(), strategy->optimizer_state(), state, recipe.resolved_text(), writer);
    if (writer) prune_checkpoints(run_dir, recipe.checkpoint.keep);
    last_saved = path;
  };

  if (state.step >= total_steps || state.epoch >= recipe.train.epochs) {
    log::info("{}: run already complete at step {} ({}); use --fresh to start over", run_dir, state.step,
              existing.empty() ? "nothing to train" : existing.back());
    summary.steps = state.step;
    summary.epochs = state.epoch;
    summary.last_checkpoint = existing.empty() ? "" : existing.back();
    return summary;
  }

  std::optional<TensorBoardLog> tensorboard;  // rank 0's, as metrics.jsonl
  if (writer && recipe.train.tensorboard) tensorboard.emplace(run_dir, state, recipe.train.tensorboard_every_steps);

  double train_seconds = 0;
  int64_t trained_examples = 0;
  while (state.epoch < recipe.train.epochs && state.step < total_steps) {
    loader.start(state.epoch, state.batch_in_epoch);
    progress.begin_epoch(state.epoch);
    double lr = schedule.at(std::max<int64_t>(state.step - 1, 0));  // the last step's: resumed at its end, an epoch runs none
    while (state.step < total_steps) {
      std::optional<Batch> batch = loader.next();
      if (!batch) break;
      lr = schedule.at(state.step);
      const auto t0 = clock::now();
      const LossStats stats = strategy->train_step(
          *batch, StepInfo{state.step, static_cast<float>(lr), derive_seed(recipe.seed, static_cast<uint64_t>(state.step))});
      const double dt = std::chrono::duration<double>(clock::now() - t0).count();
      check_loss_finite(stats, state.step + 1, last_saved);
      state.epoch_stats += stats;
      state.epoch_seconds += dt;
      train_seconds += dt;
      trained_examples += stats.count;
      ++state.step;
      ++state.batch_in_epoch;
      if (tensorboard) tensorboard->step(state.step, stats);
      progress.update(state.batch_in_epoch, state.epoch_stats,
                      static_cast<double>(state.epoch_stats.count) / std::max(state.epoch_seconds, 1e-9), state.epoch_seconds);
      if (recipe.checkpoint.every_steps && state.step % recipe.checkpoint.every_steps == 0 && state.step < total_steps) save();
      if (state.step == options.crash_after_step) {
        summary.steps = state.step;
        return summary;
      }
      // Every worker stops after the same step, whichever of them got the signal.
      if (state.step < total_steps) summary.stopped_by = strategy->max_over_workers(stop_signal());
      if (summary.stopped_by) break;
    }
    if (summary.stopped_by) break;  // no epoch report: a rerun redoes it from the checkpoint

    const bool epoch_done = state.batch_in_epoch == per_epoch;
    EpochReport report{state.epoch + 1, state.step, state.batch_in_epoch, strategy->epoch_total(state.epoch_stats), {}, lr,
                       static_cast<double>(state.epoch_stats.count) / std::max(state.epoch_seconds, 1e-9), state.epoch_seconds};
    if (recipe.train.validate) {
      strategy->prepare_for_read();
      report.validation = evaluate_dataset(*strategy, data.test, recipe.train.eval_batch);
    }
    progress.end_epoch(report);
    if (tensorboard) tensorboard->epoch(report);
    if (writer) append_metrics(metrics_file, report, epoch_done);

    summary.loss = mean_loss(report.train);
    summary.accuracy = accuracy(report.train);
    summary.validated = report.validation.count > 0;
    summary.val_loss = mean_loss(report.validation);
    summary.val_accuracy = accuracy(report.validation);
    if (!epoch_done) break;  // the step cap ended the run inside this epoch
    state = TrainState{state.step, state.epoch + 1, 0, {}, 0.0};
    const bool last = state.epoch == recipe.train.epochs || state.step == total_steps;
    if (recipe.checkpoint.every_epochs && (state.epoch % recipe.checkpoint.every_epochs == 0) && !last) save();
  }
  save();  // the final state, or where a stop signal ended the run

  summary.last_checkpoint = last_saved;
  summary.steps = state.step;
  summary.epochs = state.epoch;
  if (summary.stopped_by) return summary;  // not over: no summary.json (TensorBoard's file closes as we return)
  summary.train_seconds = train_seconds;
  summary.images_per_sec = static_cast<double>(trained_examples) / std::max(train_seconds, 1e-9);
  if (writer) write_summary(fs::path(run_dir) / "summary.json", recipe.name, summary);
  return summary;
}

}  // namespace distrain
