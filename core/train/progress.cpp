#include "core/train/progress.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace distrain {

namespace {

constexpr int kBarWidth = 30;

std::string bar(int64_t done, int64_t total) {
  const int filled = total ? static_cast<int>(kBarWidth * done / total) : kBarWidth;
  std::string s(static_cast<size_t>(kBarWidth), '.');
  for (int i = 0; i < filled; ++i) s[static_cast<size_t>(i)] = '=';
  if (filled < kBarWidth) s[static_cast<size_t>(filled)] = '>';
  return "[" + s + "]";
}

double mean_loss(const LossStats& s) { return s.count ? s.loss_sum / static_cast<double>(s.count) : 0.0; }
double accuracy(const LossStats& s) { return s.count ? static_cast<double>(s.correct) / static_cast<double>(s.count) : 0.0; }

}  // namespace

std::string format_duration(double seconds) {
  const auto t = static_cast<int64_t>(std::max(0.0, std::round(seconds)));
  if (t >= 3600) return fmt::format("{}:{:02d}:{:02d}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{}:{:02d}", t / 60, t % 60);
}

Progress::Progress(std::FILE* out, bool interactive, int64_t epochs, int64_t batches_per_epoch)
    : out_(out), interactive_(interactive), epochs_(epochs), batches_(batches_per_epoch) {}

void Progress::begin_epoch(int64_t epoch) {
  epoch_ = epoch;
  last_draw_ = {};
}

void Progress::update(int64_t done, const LossStats& running, double images_per_sec, double seconds) {
  if (!out_ || !interactive_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < batches_ && now - last_draw_ < std::chrono::milliseconds(100)) return;  // redraw at most 10 times a second
  last_draw_ = now;
  const double eta = done ? seconds / static_cast<double>(done) * static_cast<double>(batches_ - done) : 0.0;
  fmt::print(out_, "\r\033[KEpoch {}/{}  {}/{} {} ETA {} - loss: {:.4f} - accuracy: {:.4f} - {:.0f} img/s", epoch_ + 1,
             epochs_, done, batches_, bar(done, batches_), format_duration(eta), mean_loss(running), accuracy(running),
             images_per_sec);
  std::fflush(out_);
}

void Progress::end_epoch(const EpochReport& r) {
  if (!out_) return;
  const std::string val = r.validation.count ? fmt::format(" - val_loss: {:.4f} - val_accuracy: {:.4f}", mean_loss(r.validation),
                                                           accuracy(r.validation))
                                             : "";
  if (interactive_) {
    fmt::print(out_, "\r\033[KEpoch {}/{}  {}/{} {} {} - loss: {:.4f} - accuracy: {:.4f}{} - {:.0f} img/s\n", r.epoch, epochs_,
               r.batches, batches_, bar(r.batches, batches_), format_duration(r.seconds), mean_loss(r.train), accuracy(r.train), val,
               r.images_per_sec);
  } else {
    fmt::print(out_, "epoch {}/{} step {} - loss: {:.4f} - accuracy: {:.4f}{} - lr: {:.3g} - {:.0f} img/s - {:.1f}s\n",
               r.epoch, epochs_, r.step, mean_loss(r.train), accuracy(r.train), val, r.learning_rate, r.images_per_sec,
               r.seconds);
  }
  std::fflush(out_);
}

}  // namespace distrain
