// What a training run shows in TensorBoard (train.tensorboard): each epoch's metrics,
// tagged as in metrics.jsonl (loss, accuracy, val_loss, val_accuracy, learning_rate,
// images_per_sec) at the global step where the epoch ended, and `batch_loss`, the loss of
// every train.tensorboard_every_steps-th step. Written by rank 0 only, as metrics.jsonl.
#pragma once
#include <chrono>
#include <optional>
#include <string>

#include "core/io/checkpoint.hpp"
#include "core/io/tensorboard.hpp"
#include "core/train/progress.hpp"

namespace distrain {

class TensorBoardLog {
 public:
  // Drops the run folder's events that the resumed checkpoint does not cover, as
  // metrics.jsonl is trimmed: those after its step, which this run redoes, and, when it was
  // saved inside an epoch, that partial epoch's metrics. Then opens a new event file.
  // resumed: the checkpoint's state (step 0: nothing to keep). every_steps = 0: epoch metrics only.
  // flush_seconds: the step losses reach the file at least this often, so that TensorBoard
  // shows a running epoch live (0: each one at once).
  TensorBoardLog(const std::string& run_dir, const TrainState& resumed, int64_t every_steps, double flush_seconds = 10);
  // After optimizer step `step` (counted from 1), with that step's metrics and, with
  // optimizer.clip_norm, its gradients' global norm (`grad_norm`).
  void step(int64_t step, const LossStats& stats, std::optional<double> grad_norm = std::nullopt);
  // At the end of an epoch (or of the run, inside one); flushes the file.
  void epoch(const EpochReport& report);

 private:
  EventFileWriter file_;
  int64_t every_steps_;
  std::chrono::duration<double> flush_every_;
  std::chrono::steady_clock::time_point flushed_ = std::chrono::steady_clock::now();
};

}  // namespace distrain
