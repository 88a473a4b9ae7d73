// The run folder's JSON records, written by worker 0:
//   metrics.jsonl  one object per epoch, appended as the epoch ends: epoch, step, loss,
//                  accuracy, val_loss, val_accuracy (null when not validated), learning_rate,
//                  images_per_sec, seconds, grad_norm (the mean global gradient norm before
//                  clipping, null without optimizer.clip_norm), complete (false when
//                  train.steps ended it early);
//   summary.json   one object at the end of the run: name, steps, epochs_completed, loss,
//                  accuracy, val_loss, val_accuracy, train_seconds, images_per_sec, last_checkpoint.
// Numbers are written at full precision; a NaN loss is null.
#pragma once
#include <filesystem>
#include <string>

#include "core/train/progress.hpp"
#include "core/train/trainer.hpp"

namespace distrain {

void append_metrics(const std::filesystem::path& file, const EpochReport& report, bool complete);

// Keeps the lines of the epochs a checkpoint has completed (epoch <= completed_epochs):
// a resumed run redoes the later ones. Lines that are not JSON (a write cut short) go too.
void trim_metrics(const std::filesystem::path& file, int64_t completed_epochs);

void write_summary(const std::filesystem::path& file, const std::string& name, const TrainSummary& summary);

// The figures of a summary from metrics.jsonl (its last epoch; train_seconds summed over
// the epochs), for a completed run whose summary a full disk kept out. False without a line.
bool summary_from_metrics(const std::filesystem::path& file, TrainSummary& summary);

}  // namespace distrain
