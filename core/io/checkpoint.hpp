// HDF5 checkpoints, format_version 1 (docs/checkpoint-format.md):
//   /                 attrs format, format_version, step, epoch, recipe, distrain_version,
//                     vocabulary (token data: how `generate` decodes, Vocabulary::to_text)
//   /model/<layer>/<variable>               float32, full Keras shapes
//   /optimizer        attrs type, iterations; /optimizer/<slot>/<layer>/<variable>
//   /state            attrs for an exact resume: next batch in the epoch, partial metrics
// Saving is atomic: write <file>.tmp.<pid>, flush, fsync, rename. A crash at any moment
// leaves every earlier checkpoint intact; the PID keeps two processes from sharing a name.
#pragma once
#include <limits>
#include <string>
#include <vector>

#include "core/model/loss.hpp"
#include "core/model/model.hpp"
#include "core/model/model_state.hpp"
#include "core/optim/optimizer_state.hpp"

namespace distrain {

// Where training stands: enough to continue exactly where it stopped.
// What checkpoint.keep_best and train.early_stopping have seen of the validations so far
// (carried by checkpoints, so that a resumed run judges as the uninterrupted one would).
struct ValidationMonitor {
  double best = std::numeric_limits<double>::quiet_NaN();  // the monitored figure's best; NaN: none yet
  int64_t best_step = 0;
  int64_t waited = 0;  // validations since the best, none of them better by min_delta
  bool stopped_early = false;
};

struct TrainState {
  int64_t step = 0;            // optimizer steps done
  int64_t epoch = 0;           // current epoch (0-based)
  int64_t batch_in_epoch = 0;  // next batch of that epoch
  LossStats epoch_stats;       // metrics of the epoch so far
  double epoch_seconds = 0.0;  // training time spent in the epoch so far
  // With optimizer.clip_norm: the sum of the epoch's steps' global gradient norms, and their number.
  double epoch_grad_norm_sum = 0.0;
  int64_t epoch_grad_norms = 0;
  ValidationMonitor monitor;  // kept by TrainRun, written with the state
};

struct CheckpointHeader {
  std::string path, recipe, distrain_version;
  std::string vocabulary;  // empty for a model not trained on token data
  std::vector<std::string> class_names;  // an image folder's classes, by index; empty elsewhere
  TrainState state;
};

// Called by every rank (variables and optimizer slots may be sharded and are gathered a
// variable at a time); only `writer` writes the file. A variable or slot holding NaN or
// infinity is a UserError naming it, and nothing is written.
void save_checkpoint(const std::string& path, ModelState& model, OptimizerState& optimizer, const TrainState& state,
                     const std::string& recipe_text, bool writer = true, const std::string& vocabulary = "",
                     const std::vector<std::string>& class_names = {});

// Checks the file is a distrain checkpoint this version reads; UserError otherwise.
CheckpointHeader read_checkpoint_header(const std::string& path);
// Loads every variable of the model (trainable and state); the file must have each one
// with the same shape, or the error names the first that differs.
void load_weights(const std::string& path, ModelState& model);
void load_weights(const std::string& path, Model& model);
// Loads slots and iteration count; the optimizer must be bound and of the same type.
void load_optimizer(const std::string& path, const ParamArena& layout, OptimizerState& optimizer);

// ckpt-<step>.h5 files of a run folder, oldest first.
std::vector<std::string> list_checkpoints(const std::string& dir);

// What a user names with --ckpt: a checkpoint file, or a run folder (its newest checkpoint).
// A missing file is a UserError listing the checkpoints beside where it was looked for.
std::string find_checkpoint(const std::string& file_or_run_dir);
std::string checkpoint_name(int64_t step);
// A file a save cut short left behind: <name>.tmp.<pid> (or <name>.tmp, as TensorBoard's
// trim and earlier versions name theirs).
bool is_partial_save(const std::string& path);
// Deletes all but the newest `keep`, never the newest one. Only finite checkpoints are
// ever written (save_checkpoint refuses NaN and infinity), so what remains can resume.
void prune_checkpoints(const std::string& dir, int64_t keep);

}  // namespace distrain
