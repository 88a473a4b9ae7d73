#include "core/train/tensorboard_log.hpp"

namespace distrain {

namespace {

// TensorBoard's scalars are float32.
float mean_loss_f32(const LossStats& s) { return static_cast<float>(s.mean_loss()); }
float accuracy_f32(const LossStats& s) { return static_cast<float>(s.accuracy()); }

constexpr const char* kStepTag = "batch_loss";

// Trims before the writer picks its file name, which must sort after the kept files.
const std::string& trimmed(const std::string& run_dir, const TrainState& resumed) {
  // A checkpoint inside an epoch follows either a crash (no epoch metrics at its step) or
  // a train.steps cap, whose partial epoch's metrics the resumed run writes again whole.
  const bool mid_epoch = resumed.batch_in_epoch > 0;
  trim_event_files(run_dir, [&](const Event& e) {
    return e.step < resumed.step || (e.step == resumed.step && (!mid_epoch || e.scalars[0].first == kStepTag));
  });
  return run_dir;
}

}  // namespace

TensorBoardLog::TensorBoardLog(const std::string& run_dir, const TrainState& resumed, int64_t every_steps, double flush_seconds)
    : file_(trimmed(run_dir, resumed)), every_steps_(every_steps), flush_every_(flush_seconds) {}

void TensorBoardLog::step(int64_t step, const LossStats& stats, std::optional<double> grad_norm) {
  if (every_steps_ <= 0 || step % every_steps_ != 0) return;
  Scalars s{{kStepTag, mean_loss_f32(stats)}};
  if (grad_norm) s.emplace_back("grad_norm", static_cast<float>(*grad_norm));
  file_.add(step, s);
  const auto now = std::chrono::steady_clock::now();
  if (now - flushed_ < flush_every_) return;
  file_.flush();
  flushed_ = now;
}

void TensorBoardLog::epoch(const EpochReport& report) {
  Scalars s{{"loss", mean_loss_f32(report.train)}, {"accuracy", accuracy_f32(report.train)}};
  if (report.validation.count) {
    s.emplace_back("val_loss", mean_loss_f32(report.validation));
    s.emplace_back("val_accuracy", accuracy_f32(report.validation));
  }
  s.emplace_back("learning_rate", static_cast<float>(report.learning_rate));
  s.emplace_back("images_per_sec", static_cast<float>(report.images_per_sec));
  if (report.grad_norm) s.emplace_back("grad_norm", static_cast<float>(*report.grad_norm));
  file_.add(report.step, s);
  file_.flush();
}

}  // namespace distrain
