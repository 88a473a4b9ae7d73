#include "core/train/tensorboard_log.hpp"

#include <filesystem>

namespace distrain {

namespace fs = std::filesystem;

namespace {

// TensorBoard's scalars are float32.
float f32(double v) { return static_cast<float>(v); }

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::string sub_dir(const std::string& run_dir, const char* name) {
  const fs::path dir = fs::path(run_dir) / name;
  fs::create_directories(dir);
  return dir.string();
}

// Trims before a writer picks its file name, which must sort after the kept files.
const std::string& trimmed(const std::string& dir, const TrainState& resumed) {
  // A checkpoint inside an epoch follows either a crash (no epoch metrics at its step) or
  // a train.steps cap, whose partial epoch's metrics the resumed run writes again whole.
  const bool mid_epoch = resumed.batch_in_epoch > 0;
  trim_event_files(dir, [&](const Event& e) {
    const std::string& tag = e.scalars[0].first;
    if (starts_with(tag, "batch_")) return e.step <= resumed.step;
    if (starts_with(tag, "epoch_")) return e.step < resumed.epoch;  // an epoch's index: those done
    return e.step < resumed.step || (e.step == resumed.step && !mid_epoch);  // evaluation_*_vs_iterations
  });
  return dir;
}

}  // namespace

TensorBoardLog::TensorBoardLog(const std::string& run_dir, const TrainState& resumed, int64_t every_steps, double flush_seconds)
    : validation_dir_(trimmed(sub_dir(run_dir, "validation"), resumed)),
      train_(trimmed(sub_dir(run_dir, "train"), resumed)),
      every_steps_(every_steps),
      flush_every_(flush_seconds) {}

void TensorBoardLog::step(int64_t step, const LossStats& stats, double learning_rate, std::optional<double> grad_norm) {
  if (every_steps_ <= 0 || step % every_steps_ != 0) return;
  Scalars s{{"batch_loss", f32(stats.mean_loss())}, {"batch_accuracy", f32(stats.accuracy())},
            {"batch_learning_rate", f32(learning_rate)}};
  if (grad_norm) s.emplace_back("batch_grad_norm", f32(*grad_norm));
  train_.add(step, s);
  const auto now = std::chrono::steady_clock::now();
  if (now - flushed_ < flush_every_) return;
  train_.flush();
  flushed_ = now;
}

void TensorBoardLog::epoch(const EpochReport& report) {
  const int64_t index = report.epoch - 1;
  Scalars s{{"epoch_loss", f32(report.train.mean_loss())}, {"epoch_accuracy", f32(report.train.accuracy())},
            {"epoch_learning_rate", f32(report.learning_rate)}, {"epoch_images_per_sec", f32(report.images_per_sec)}};
  if (report.grad_norm) s.emplace_back("epoch_grad_norm", f32(*report.grad_norm));
  train_.add(index, s);
  train_.flush();
  if (!report.validation.count) return;
  if (!validation_) validation_.emplace(validation_dir_);
  validation_->add(index, {{"epoch_loss", f32(report.validation.mean_loss())}, {"epoch_accuracy", f32(report.validation.accuracy())}});
  validation_->add(report.step, {{"evaluation_loss_vs_iterations", f32(report.validation.mean_loss())},
                                 {"evaluation_accuracy_vs_iterations", f32(report.validation.accuracy())}});
  validation_->flush();
}

std::vector<std::string> tensorboard_folders(const std::string& run_dir) {
  return {run_dir, (fs::path(run_dir) / "train").string(), (fs::path(run_dir) / "validation").string()};
}

void remove_tensorboard_events(const std::string& run_dir) {
  for (const std::string& dir : tensorboard_folders(run_dir))
    for (const auto& f : list_event_files(dir)) fs::remove(f);
}

}  // namespace distrain
