// Recipe: the TOML file that describes a training job, parsed into typed structs.
// Every key is checked (type, range, unknown keys rejected) before anything is allocated;
// errors name the file, the line and the key. docs/recipe.md is the reference.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "core/base/dtype.hpp"
#include "core/model/model_spec.hpp"
#include "core/io/strategy_spec.hpp"
#include "core/model/loss.hpp"
#include "core/optim/lr_schedule.hpp"
#include "core/optim/optimizer.hpp"
#include "datasets/dataset.hpp"

namespace distrain {

// train.early_stopping, as Keras's EarlyStopping: stop once `patience` validations in a row
// have not improved `monitor` by more than min_delta; restore_best: the run's last weights
// are the best validation's (checkpoint.keep_best's best.h5).
struct EarlyStoppingSpec {
  bool enabled = false;
  std::string monitor = "val_loss";  // val_loss (lower is better) | val_accuracy (higher is better)
  int64_t patience = 0;
  double min_delta = 0.0;
  bool restore_best = false;
};

struct TrainSpec {
  int64_t epochs = 1;
  int64_t steps = 0;  // 0 = no cap; > 0 stops after that many optimizer steps
  bool validate = true;
  int64_t validate_every_steps = 0;  // > 0: also validate after every N-th step (0: at epoch ends only)
  EarlyStoppingSpec early_stopping;
  int64_t eval_batch = 500;
  bool allow_tf32 = false;  // GPU matrix products and convolutions may round to TF32
  bool tensorboard = true;  // TensorBoard event files in the run folder
  int64_t tensorboard_every_steps = 100;  // also the loss of every N-th step; 0 = epoch metrics only
  double tensorboard_flush_seconds = 10;  // step losses reach the file at least this often (0: each at once)
  // A step whose loss is NaN or infinite: stop the run (the default), or skip its update
  // (up to kMaxSkippedInARow in a row) and go on.
  bool skip_nonfinite_steps = false;
  static constexpr int kMaxSkippedInARow = 10;
  // Micro-batches of strategy.per_replica_batch whose gradients one optimizer step sums:
  // the step's batch per replica is per_replica_batch x accumulate_steps, its activations
  // those of one micro-batch.
  int64_t accumulate_steps = 1;
  static constexpr int64_t kMaxAccumulateSteps = 65536;
  // train.recompute = "blocks": only the outputs of the model's repeat blocks (and of the
  // layers outside them) are kept from forward; each block's forward reruns in backward.
  bool recompute_blocks = false;
  // train.precision = "bf16": the operands of dense and attention matrix products rounded
  // to bfloat16, accumulated in float32; every layer's output but the last rounded to bf16
  // and kept at 2 bytes an element; weights, optimizer state, losses and checkpoints stay
  // float32.
  DType matmul_dtype = DType::f32;
};

struct CheckpointSpec {
  std::string dir;  // default runs/<name>
  int64_t every_epochs = 1, every_steps = 0, keep = 3;
  std::string init_from;  // weights only, then train
  std::string resume_from;  // a checkpoint to go on from instead of the run folder's newest
  std::string keep_best;    // "val_loss" | "val_accuracy": best.h5 holds the best validation's state; "" none
};

struct Recipe {
  std::string file;  // for messages
  std::string name;
  uint64_t seed = 0;
  DataSpec data;
  LossSpec loss;
  OptimizerSpec optimizer;
  ScheduleSpec schedule;
  StrategySpec strategy;
  TrainSpec train;
  CheckpointSpec checkpoint;
  // The parsed file after --set, shared by copies. Kept as parsed (not copied) so that
  // errors raised later, e.g. by a layer in [model], still know their line.
  std::shared_ptr<const toml::table> table;

  std::shared_ptr<const ModelSpec> model_spec;  // [model], read once; shared by copies
  // What the user should hear once before the run, though nothing is wrong: keys of another
  // strategy left in [strategy] and dropped from the table.
  std::vector<std::string> notices;

  const ModelSpec& model() const { return *model_spec; }
  // The examples one replica takes per optimizer step (train.accumulate_steps micro-batches).
  int64_t step_batch() const { return strategy.per_replica_batch * train.accumulate_steps; }
  std::string resolved_text() const;
};

// Reads and validates a recipe file, applying KEY=VALUE overrides first (dotted keys;
// the value is TOML, or a plain string when it does not parse as TOML).
Recipe load_recipe(const std::string& path, const std::vector<std::string>& overrides = {});
// Parses recipe text (e.g. stored in a checkpoint), applying overrides as load_recipe
// does; `file` names it in errors.
Recipe parse_recipe(const std::string& text, const std::string& file, const std::vector<std::string>& overrides = {});
// Validates an already parsed table.
Recipe recipe_from_table(std::shared_ptr<const toml::table> table, const std::string& file);

// `text` as a TOML basic string ("..." with quotes, backslashes and control characters
// escaped): for a --set whose value must stay a string even where it reads as TOML ("true").
std::string toml_quoted(const std::string& text);

// Sets `key` (dotted, array items by index: model.layers.1.filters) to `value`.
void apply_override(toml::table& table, const std::string& assignment, const std::string& file);

}  // namespace distrain
