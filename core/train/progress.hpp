// Progress output of `distrain train` (rank 0 only), in one of three styles:
//   bar   a Keras-style bar per epoch, redrawn in place and fitted to the terminal's width:
//         Epoch 3/10  469/469 [=====>........] ETA 0:03 - loss: 0.2841 - accuracy: 0.8963 - 5210 img/s
//         followed by the epoch's validation figures;
//   line  plain lines for logs: one every `every` batches and one per epoch; no carriage
//         returns or escape sequences;
//   none  nothing.
#pragma once
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "core/model/loss.hpp"

namespace distrain {

enum class ProgressStyle { bar, line, none };

struct ProgressOptions {
  ProgressStyle style = ProgressStyle::line;
  int64_t every = 0;  // line style: a line every this many batches; 0: about ten per epoch
  std::string rate_unit = "img/s";  // "tok/s" for a language model: its loss counts tokens
};

struct EpochReport {
  int64_t epoch = 0;  // 1-based
  int64_t step = 0;
  int64_t batches = 0;  // done in this epoch (fewer than the epoch's when train.steps ends it)
  LossStats train, validation;  // validation.count == 0 when not validated
  double learning_rate = 0.0, images_per_sec = 0.0, seconds = 0.0;
  std::optional<double> grad_norm;  // the mean of the steps' global gradient norms (optimizer.clip_norm)
};

class Progress {
 public:
  // out == nullptr: print nothing (workers other than rank 0). total_steps (train.steps,
  // when it ends the run early) bounds the epochs and batches shown and the ETA.
  Progress(std::FILE* out, ProgressOptions options, int64_t epochs, int64_t batches_per_epoch, int64_t total_steps = 0);
  void begin_epoch(int64_t epoch);  // 0-based
  // Whether the figures up to `batches_done` are wanted (a line is due, or a bar's redraw):
  // the same on every rank, printing or not, as the read of figures is collective.
  bool wants_figures(int64_t batches_done) const;
  // After a batch whose figures were read: batches done in the epoch, the epoch's running metrics.
  void update(int64_t batches_done, const LossStats& running, double images_per_sec, double seconds);
  void end_epoch(const EpochReport& report);
  // A validation inside an epoch (train.validate_every_steps), after the step `step`.
  void validation(int64_t step, const LossStats& validation);
  // The run stops before its epoch's end (a stop signal): a bar's open line is ended, so
  // that what is printed next starts a line of its own.
  void interrupt();

 private:
  void draw_bar(int64_t done, const LossStats& running, double images_per_sec, double eta);
  std::FILE* out_;
  ProgressStyle style_;
  int64_t every_;
  std::string rate_unit_;
  int64_t epochs_, batches_, total_steps_;
  int64_t epoch_ = 0;
  int64_t epoch_batches_ = 0;  // the batches this epoch runs: batches_, or fewer where total_steps_ ends it
  bool bar_open_ = false;      // a bar is drawn and its line not yet ended
  std::chrono::steady_clock::time_point last_draw_{};
};

std::string format_duration(double seconds);  // 0:03, 1:02:03

// The width of the terminal `out` writes to: its window size, else $COLUMNS, else 80.
int terminal_columns(std::FILE* out);
// head + " [====>...]" + tail in `columns` or fewer when it can: the bar narrows first (to
// at most 30 cells), and goes when fewer than 10 fit. The text itself is never cut here.
std::string fit_bar_line(const std::string& head, int64_t done, int64_t total, const std::string& tail, int columns);

}  // namespace distrain
