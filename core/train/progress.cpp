#include "core/train/progress.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

namespace distrain {

namespace {

constexpr int kBarWidth = 30;
constexpr int kMinBarWidth = 10;  // narrower bars say too little for the room they take
constexpr int64_t kLinesPerEpoch = 10;
constexpr int64_t kBarEvery = 16;  // batches between a bar's figures, at most

std::string bar(int64_t done, int64_t total, int width) {
  const int filled = total ? static_cast<int>(width * done / total) : width;
  std::string s(static_cast<size_t>(width), '.');
  for (int i = 0; i < filled; ++i) s[static_cast<size_t>(i)] = '=';
  if (filled < width) s[static_cast<size_t>(filled)] = '>';
  return "[" + s + "]";
}

// One column short of the terminal: some terminals wrap as soon as the last one is
// written, and a wrapped line leaves a copy of its start behind at every redraw.
int line_width(std::FILE* out) { return std::max(1, terminal_columns(out) - 1); }

std::string validation_figures(const LossStats& v) {
  return v.count ? fmt::format(" - val_loss: {:.4f} - val_accuracy: {:.4f}", v.mean_loss(), v.accuracy()) : "";
}

}  // namespace

std::string format_duration(double seconds) {
  const auto t = static_cast<int64_t>(std::max(0.0, std::round(seconds)));
  if (t >= 3600) return fmt::format("{}:{:02d}:{:02d}", t / 3600, t / 60 % 60, t % 60);
  return fmt::format("{}:{:02d}", t / 60, t % 60);
}

int terminal_columns(std::FILE* out) {
  winsize ws{};
  if (::ioctl(::fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns && std::atoi(columns) > 0) return std::atoi(columns);
  return 80;
}

std::string fit_bar_line(const std::string& head, int64_t done, int64_t total, const std::string& tail, int columns) {
  const int room = columns - static_cast<int>(head.size() + tail.size()) - 3;  // " [" and "]"
  if (room < kMinBarWidth) return head + tail;
  return head + " " + bar(done, total, std::min(room, kBarWidth)) + tail;
}

namespace {

// The running bar's figures, shortened until a bar of at least kMinBarWidth cells fits
// beside them: the img/s go first, then "accuracy" becomes Keras's "acc". At 80 columns the
// full set left no room, and the bar showed only from about 100.
std::string bar_figures(const std::string& head, const std::string& eta, const LossStats& running, double images_per_sec,
                        const std::string& unit, int columns) {
  const std::string loss = fmt::format(" ETA {} - loss: {:.4f}", eta, running.mean_loss());
  const std::vector<std::string> figures{
      fmt::format("{} - accuracy: {:.4f} - {:.0f} {}", loss, running.accuracy(), images_per_sec, unit),
      fmt::format("{} - accuracy: {:.4f}", loss, running.accuracy()), fmt::format("{} - acc: {:.4f}", loss, running.accuracy())};
  for (const std::string& f : figures)
    if (columns - static_cast<int>(head.size() + f.size()) - 3 >= kMinBarWidth) return f;
  return figures.front();  // no bar fits anyway: all the figures
}

}  // namespace

Progress::Progress(std::FILE* out, ProgressOptions options, int64_t epochs, int64_t batches_per_epoch, int64_t total_steps)
    : out_(options.style == ProgressStyle::none ? nullptr : out),
      style_(options.style),
      every_(options.every > 0 ? options.every : std::max<int64_t>(1, (batches_per_epoch + kLinesPerEpoch - 1) / kLinesPerEpoch)),
      rate_unit_(options.rate_unit),
      epochs_(total_steps > 0 && batches_per_epoch > 0 ? std::min(epochs, (total_steps + batches_per_epoch - 1) / batches_per_epoch)
                                                       : epochs),
      batches_(batches_per_epoch),
      total_steps_(total_steps) {}

void Progress::begin_epoch(int64_t epoch) {
  epoch_ = epoch;
  epoch_batches_ = total_steps_ > 0 ? std::clamp<int64_t>(total_steps_ - epoch * batches_, 0, batches_) : batches_;
  last_draw_ = {};
}

void Progress::interrupt() {
  if (!out_ || !bar_open_) return;
  fmt::print(out_, "\n");
  std::fflush(out_);
  bar_open_ = false;
}

bool Progress::wants_figures(int64_t done) const {
  if (style_ == ProgressStyle::none) return false;
  return done % (style_ == ProgressStyle::bar ? std::min(every_, kBarEvery) : every_) == 0;
}

void Progress::update(int64_t done, const LossStats& running, double images_per_sec, double seconds) {
  if (!out_) return;
  const double eta = done ? seconds / static_cast<double>(done) * static_cast<double>(epoch_batches_ - done) : 0.0;
  if (style_ == ProgressStyle::bar) {
    draw_bar(done, running, images_per_sec, eta);
    return;
  }
  if (done % every_ != 0 || done == epoch_batches_) return;  // the epoch's own line follows the last batch
  fmt::print(out_, "epoch {}/{} batch {}/{} - loss: {:.4f} - accuracy: {:.4f} - {:.0f} {} - ETA {}\n", epoch_ + 1, epochs_,
             done, epoch_batches_, running.mean_loss(), running.accuracy(), images_per_sec, rate_unit_, format_duration(eta));
  std::fflush(out_);
}

void Progress::draw_bar(int64_t done, const LossStats& running, double images_per_sec, double eta) {
  const auto now = std::chrono::steady_clock::now();
  if (done < epoch_batches_ && now - last_draw_ < std::chrono::milliseconds(100)) return;  // redraw at most 10 times a second
  last_draw_ = now;
  const int width = line_width(out_);
  const std::string head = fmt::format("Epoch {}/{}  {}/{}", epoch_ + 1, epochs_, done, epoch_batches_);
  std::string line = fit_bar_line(head, done, epoch_batches_,
                                  bar_figures(head, format_duration(eta), running, images_per_sec, rate_unit_, width), width);
  line.resize(std::min(line.size(), static_cast<size_t>(width)));  // \r goes back to the start of the last row only
  fmt::print(out_, "\r\033[K{}", line);
  std::fflush(out_);
  bar_open_ = true;
}

void Progress::validation(int64_t step, const LossStats& v) {
  if (!out_) return;
  interrupt();
  fmt::print(out_, "step {}{}\n", step, validation_figures(v));
  std::fflush(out_);
}

void Progress::end_epoch(const EpochReport& r) {
  if (!out_) return;
  const std::string val = validation_figures(r.validation);
  if (style_ == ProgressStyle::bar) {
    // The epoch's last line stays, so it may wrap: only the bar gives way to the figures.
    const std::string line = fit_bar_line(fmt::format("Epoch {}/{}  {}/{}", r.epoch, epochs_, r.batches, epoch_batches_), r.batches,
                                          epoch_batches_,
                                          fmt::format(" {} - loss: {:.4f} - accuracy: {:.4f}{} - {:.0f} {}", format_duration(r.seconds),
                                                      r.train.mean_loss(), r.train.accuracy(), val, r.images_per_sec, rate_unit_),
                                          line_width(out_));
    fmt::print(out_, "\r\033[K{}\n", line);
    bar_open_ = false;
  } else {
    // Two lines within 80 columns: training's figures, then validation's and the rate.
    fmt::print(out_, "epoch {}/{} step {} - loss: {:.4f} - accuracy: {:.4f} - {:.0f} {} - {:.1f}s\n  {}lr: {:.3g}\n",
               r.epoch, epochs_, r.step, r.train.mean_loss(), r.train.accuracy(), r.images_per_sec, rate_unit_, r.seconds,
               val.empty() ? "" : val.substr(3) + " - ", r.learning_rate);
  }
  std::fflush(out_);
}

}  // namespace distrain
