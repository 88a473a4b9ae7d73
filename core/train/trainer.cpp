#include "core/train/trainer.hpp"

#include <algorithm>
#include <filesystem>

#include "core/base/host_memory.hpp"
#include "core/base/log.hpp"
#include "core/io/checkpoint.hpp"
#include "core/optim/lr_schedule.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/batch_source.hpp"
#include "core/train/data_placement.hpp"
#include "core/train/metrics_log.hpp"
#include "core/train/preflight.hpp"
#include "core/train/resume_checks.hpp"
#include "core/train/run_lock.hpp"
#include "core/train/slow_phase.hpp"
#include "core/train/step_loop.hpp"
#include "core/train/tensorboard_log.hpp"
#include "core/train/train_run.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

// The run folder, ready for this run: created and proven writable; worker 0 locks it
// before anything in it is written or deleted, clears partial saves a crash left, and
// with `fresh` the earlier run's checkpoints, metrics and events. The lock is held until
// the returned object goes.
std::unique_ptr<RunLock> open_run_folder(const std::string& run_dir, bool writer, bool fresh) {
  prepare_run_folder(run_dir, writer);
  if (!writer) return nullptr;
  auto lock = std::make_unique<RunLock>(run_dir);
  for (const std::string& dir : tensorboard_folders(run_dir))  // the run folder and its events' folders
    if (fs::is_directory(dir))
      for (const auto& e : fs::directory_iterator(dir))
        if (is_partial_save(e.path().string())) fs::remove(e.path());
  if (fresh) {
    for (const auto& c : list_checkpoints(run_dir)) fs::remove(c);
    fs::remove(fs::path(run_dir) / "metrics.jsonl");
    fs::remove(fs::path(run_dir) / "summary.json");
    remove_tensorboard_events(run_dir);
  }
  return lock;
}

// Every epoch has between 1 and `examples` steps (a batch holds at least one example):
// a state outside that was written by hand or corrupted, and would end the run at once
// as "already complete" or index past the data.
void check_reachable(const TrainState& state, int64_t examples, const std::string& resumed) {
  int64_t most = 0;
  const bool reachable = state.epoch <= state.step && !__builtin_mul_overflow(state.epoch + 1, examples, &most) &&
                         state.step <= most;
  DT_USER_CHECK(reachable, "{}: checkpoint state step {}, epoch {} cannot come from {} training examples (each epoch "
                "takes 1 to {} steps); the file is corrupt or edited", resumed, state.step, state.epoch, examples, examples);
}

// Weights and optimizer from the newest checkpoint of the run folder (its state returned
// in `state`), else weights from checkpoint.init_from, else from the seed; then every
// replica and worker gets them. Returns the checkpoint resumed from, or "".
std::string resume_or_initialize(const Recipe& recipe, const Dataset& data, Strategy& strategy, const std::string& from,
                                 TrainState& state) {
  std::string resumed;
  if (!from.empty()) {
    resumed = from;
    const CheckpointHeader header = read_checkpoint_header(resumed);
    check_resumable(recipe, data, header);
    state = header.state;
    load_weights(resumed, strategy.model_state());
    load_optimizer(resumed, strategy.model_state().layout(), strategy.optimizer_state());
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

TrainSummary already_complete(const Recipe& recipe, const std::string& run_dir, const TrainState& state,
                              const std::string& resumed, bool writer) {
  log::info("{}: run already complete at step {} ({}{}); use --fresh to start over", run_dir, state.step,
            resumed.empty() ? "nothing to train" : resumed, state.monitor.stopped_early ? ", stopped early" : "");
  TrainSummary summary;
  summary.run_dir = run_dir;
  summary.steps = state.step;
  summary.epochs = state.epoch;
  summary.last_checkpoint = resumed;
  // The final checkpoint was written but the summary after it was not (a full disk): its
  // figures are the metrics' last epoch.
  const fs::path file = fs::path(run_dir) / "summary.json";
  if (writer && !fs::exists(file) && summary_from_metrics(fs::path(run_dir) / "metrics.jsonl", summary))
    write_summary(file, recipe.name, summary);
  return summary;
}

// checkpoint.resume_from (--resume-from): a file as given, else a name in the run folder,
// or a folder's newest. Checkpoints of the run folder from after it belong to the run being
// abandoned: kept, they would be rotated in among this run's (and a rerun would go on from
// them), so they are refused rather than deleted.
std::string chosen_checkpoint(const CheckpointSpec& spec, const std::string& run_dir, bool fresh) {
  const fs::path given(spec.resume_from);
  std::error_code ec;
  const std::string path = find_checkpoint(fs::exists(given, ec) || given.has_parent_path() ? given.string()
                                                                                           : (fs::path(run_dir) / given).string());
  const int64_t step = read_checkpoint_header(path).state.step;
  const auto same = [&](const std::string& c) { return fs::equivalent(c, path, ec); };
  const std::vector<std::string> in_folder = list_checkpoints(run_dir);
  DT_USER_CHECK(!fresh || std::none_of(in_folder.begin(), in_folder.end(), same),
                "--fresh would delete {}, which checkpoint.resume_from names; resume into another run folder (--run-dir)", path);
  for (const std::string& c : fresh ? std::vector<std::string>{} : in_folder)
    DT_USER_CHECK(same(c) || read_checkpoint_header(c).state.step <= step,
                  "{} holds {} from after step {} of {}: leave out checkpoint.resume_from (--resume-from) to go on from the "
                  "newest, move the later checkpoints out, or resume into another run folder (--run-dir)",
                  run_dir, fs::path(c).filename().string(), step, path);
  return path;
}

// The checkpoint this run goes on from: checkpoint.resume_from when given, else the run
// folder's newest (none with --fresh); "" to start from the seed (or init_from).
std::string resume_point(const Recipe& recipe, const std::string& run_dir, bool fresh) {
  if (!recipe.checkpoint.resume_from.empty()) return chosen_checkpoint(recipe.checkpoint, run_dir, fresh);
  const std::vector<std::string> found = fresh ? std::vector<std::string>{} : list_checkpoints(run_dir);
  return found.empty() ? "" : found.back();
}

// What the run's learning rate will not do (a warm-up longer than the run, a decay that
// outlasts it), and, on a resume, a schedule other than the one the checkpoint was trained
// under (train.epochs or train.steps raised, warm-up or decay edited): the rate of every
// remaining step changes then, which nothing else would say.
void say_schedule_shortfalls(const Recipe& now, const LrSchedule& schedule, const std::string& resumed, int64_t per_epoch,
                             int64_t update_batch) {
  if (const std::string unfinished = schedule.unfinished(); !unfinished.empty()) log::warn("{}", unfinished);
  if (resumed.empty()) return;
  try {
    const Recipe before = parse_recipe(read_checkpoint_header(resumed).recipe, resumed);
    if (before.step_batch() != now.step_batch()) return;  // the batch changed: another schedule, not comparable step by step
    const LrSchedule then(before.optimizer.learning_rate, before.schedule, update_batch, recipe_plan(before, per_epoch).total_steps);
    if (then.describe() != schedule.describe())
      log::info("note: the learning-rate schedule is not the one {} was trained under: now {}; was {}", resumed,
                schedule.describe(), then.describe());
  } catch (const UserError&) {
    // A stored recipe this build no longer reads (devices since gone): nothing to compare.
  }
}

LoaderSpec loader_spec(const Recipe& recipe, const Strategy& strategy) {
  LoaderSpec spec{recipe.step_batch(), strategy.num_replicas(), recipe.data.shuffle,
                  recipe.data.drop_remainder, recipe.seed};
  spec.first_replica = strategy.first_local_replica();
  spec.local_replicas = strategy.local_replicas();
  return spec;
}

// The steps from `state` (read from the checkpoint `resumed`, or the start) to the end of
// the run: the Loader's batches through StepLoop, TrainRun recording them.
TrainSummary run_steps(const Recipe& recipe, const TrainOptions& options, Strategy& strategy, const Splits& data,
                       const std::string& run_dir, const TrainState& state, const std::string& resumed) {
  LoaderSpec spec = loader_spec(recipe, strategy);
  spec.indices_only = place_data_on_devices(recipe, strategy, data.train, DataUse::training);
  Loader loader(data.train, spec);
  const int64_t per_epoch = loader.batches_per_epoch();
  if (!resumed.empty()) check_reachable(state, data.train.size(), resumed);
  DT_USER_CHECK(state.batch_in_epoch <= per_epoch, "{}: the checkpoint is at batch {} of an epoch, which has {} batches "
                "under {}; resume with the recipe that wrote it", run_dir, state.batch_in_epoch, per_epoch, recipe.file);
  check_planned_steps(recipe, per_epoch);
  const LoopPlan plan = recipe_plan(recipe, per_epoch);
  if (plan.complete(state) || state.monitor.stopped_early)  // its files stay as they are
    return already_complete(recipe, run_dir, state, resumed, strategy.rank() == 0);
  // The epoch resumed in is redone: its earlier line (and any after it) goes; with nothing
  // to resume, every line goes (a run that failed before its first checkpoint wrote them).
  if (strategy.rank() == 0) trim_metrics(fs::path(run_dir) / "metrics.jsonl", state.epoch);
  const LrSchedule schedule(recipe.optimizer.learning_rate, recipe.schedule, strategy.update_batch(loader.global_batch()),
                            plan.total_steps);
  if (strategy.rank() == 0)
    say_schedule_shortfalls(recipe, schedule, resumed, per_epoch, strategy.update_batch(loader.global_batch()));
  LoaderBatches batches(loader);
  TrainRun run(recipe, options, strategy, data.test, run_dir, plan, schedule, state, resumed);
  return run.finish(StepLoop(strategy, batches, plan, schedule, run).run(state));
}

}  // namespace

TrainSummary train(const Recipe& recipe, const TrainOptions& options) {
  const std::string run_dir = options.run_dir.empty() ? recipe.checkpoint.dir : options.run_dir;
  std::FILE* phases = log::leader() && options.progress.style != ProgressStyle::none ? options.out : nullptr;
  const Splits data = [&] {
    SlowPhase phase(phases, "reading the data");
    return load_dataset(recipe.data, recipe.seed);
  }();
  check_data_fits(recipe, data.train);
  check_last_batch(recipe, data.train);
  check_replicas_fit_host(recipe);
  const std::optional<int64_t> host_available = available_host_memory();
  auto strategy = [&] {
    SlowPhase phase(phases, "building the model and its strategy");
    return make_strategy(recipe, false, options.mesh);
  }();
  check_memory_fits(recipe, *strategy, host_available);
  const std::string from = resume_point(recipe, run_dir, options.fresh);
  if (strategy->serves()) {  // a parameter server's server: serve until the workers are done
    TrainSummary summary;
    summary.served = strategy->serve(from, recipe.checkpoint.init_from, recipe.seed);
    summary.run_dir = run_dir;
    return summary;
  }

  // Worker 0 owns the run folder; every worker reads the same checkpoint to resume.
  const bool writer = strategy->rank() == 0;
  const auto lock = open_run_folder(run_dir, writer, options.fresh);
  TrainState state;
  const std::string resumed = [&] {
    SlowPhase phase(phases, from.empty() ? "initialising the weights" : "loading " + from);
    return resume_or_initialize(recipe, data.train, *strategy, from, state);
  }();
  return run_steps(recipe, options, *strategy, data, run_dir, state, resumed);
}

}  // namespace distrain
