// Trainer: `train` sets a run up (data, the checks on it, the strategy, the run folder,
// resume or initialise) and runs it: StepLoop (step_loop.hpp), the one place that
// sequences steps, with TrainRun (train_run.hpp) for validation, metrics, progress and
// checkpoints.
//
// A run folder holds ckpt-<step>.h5 (the last checkpoint.keep), metrics.jsonl (one JSON
// object per epoch), summary.json (written at the end) and TensorBoard event files
// (train.tensorboard, core/train/tensorboard_log.hpp). A run resumes from its newest
// checkpoint unless `fresh`, and then continues exactly as if never interrupted.
#pragma once
#include <cstdio>
#include <optional>
#include <string>

#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/progress.hpp"

namespace distrain {

struct TrainOptions {
  std::string run_dir;  // empty: the recipe's checkpoint.dir
  bool fresh = false;   // ignore and delete earlier checkpoints and metrics of the run folder
  std::FILE* out = stdout;
  ProgressOptions progress;  // style of rank 0's progress on `out`: plain lines unless asked
  // > 0: stop abruptly after this optimizer step, saving nothing, as a crash would.
  // Lets tests check that a resumed run ends exactly where an uninterrupted one does.
  int64_t crash_after_step = 0;
  // strategy "mesh": this rank's place in a mesh of threads (Mesh::over_threads), one
  // train() per thread; null: the job's MPI processes, as `distrain train` runs it.
  const Mesh* mesh = nullptr;
};

struct TrainSummary {
  std::string run_dir, last_checkpoint;
  int64_t steps = 0, epochs = 0;
  double loss = 0, accuracy = 0, val_loss = 0, val_accuracy = 0;
  bool validated = false;
  int64_t skipped_steps = 0;  // steps discarded for a non-finite loss or gradient (train.on_nonfinite = "skip_step")
  int stopped_by = 0;  // SIGTERM or SIGINT when a stop signal ended the run early, checkpoint saved; else 0
  double train_seconds = 0, images_per_sec = 0;
  std::string monitored;   // the figure keep_best or early_stopping watched; "" when neither did
  ValidationMonitor best;  // what they found (best value and step, whether the run stopped early)
  std::optional<ServeReport> served;  // on a parameter server's server: what it did, instead of training
};

TrainSummary train(const Recipe& recipe, const TrainOptions& options);

}  // namespace distrain
