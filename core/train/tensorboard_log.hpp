// What a training run shows in TensorBoard (train.tensorboard), in the layout Keras's
// TensorBoard callback writes, so that distrain and Keras runs overlay:
//   <run>/train/       batch_loss, batch_accuracy, batch_learning_rate (and
//                      batch_grad_norm with optimizer.clip_norm) at the global step, every
//                      train.tensorboard_every_steps-th step: that step's values (Keras
//                      shows the epoch's running mean); epoch_loss, epoch_accuracy,
//                      epoch_learning_rate, epoch_images_per_sec (and epoch_grad_norm) at
//                      the epoch's index, 0 first
//   <run>/validation/  epoch_loss, epoch_accuracy at the epoch's index, and
//                      evaluation_loss_vs_iterations, evaluation_accuracy_vs_iterations at
//                      the global step
// The epoch values are metrics.jsonl's. Written by rank 0 only, as metrics.jsonl.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/io/checkpoint.hpp"
#include "core/io/tensorboard.hpp"
#include "core/train/progress.hpp"

namespace distrain {

class TensorBoardLog {
 public:
  // Drops the run folder's events that the resumed checkpoint does not cover, as
  // metrics.jsonl is trimmed: steps after its step, which this run redoes, and the epoch it
  // was saved in (a train.steps cap's partial epoch is reported again whole). Then opens
  // new event files. resumed: the checkpoint's state (step 0: nothing to keep).
  // every_steps = 0: epoch metrics only. flush_seconds: the step values reach the file at
  // least this often, so that TensorBoard shows a running epoch live (0: each one at once).
  TensorBoardLog(const std::string& run_dir, const TrainState& resumed, int64_t every_steps, double flush_seconds = 10);
  // After optimizer step `step` (counted from 1), with that step's metrics, learning rate
  // and, with optimizer.clip_norm, its gradients' global norm.
  void step(int64_t step, const LossStats& stats, double learning_rate, std::optional<double> grad_norm = std::nullopt);
  // At the end of an epoch (or of the run, inside one); flushes the files.
  void epoch(const EpochReport& report);

 private:
  std::string validation_dir_;
  EventFileWriter train_;
  std::optional<EventFileWriter> validation_;  // made by the first validation
  int64_t every_steps_;
  std::chrono::duration<double> flush_every_;
  std::chrono::steady_clock::time_point flushed_ = std::chrono::steady_clock::now();
};

// The folders of a run folder that hold event files: train/, validation/ and, from the
// earlier layout, the run folder itself.
std::vector<std::string> tensorboard_folders(const std::string& run_dir);
// Deletes every event file distrain wrote in them (train.fresh).
void remove_tensorboard_events(const std::string& run_dir);

}  // namespace distrain
