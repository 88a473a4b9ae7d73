// Progress output of `distrain train` (rank 0 only). On a terminal, a Keras-style bar per
// epoch redrawn in place:
//   Epoch 3/10  469/469 [=====>........] ETA 0:03 - loss: 0.2841 - accuracy: 0.8963 - 5210 img/s
// followed by the epoch's validation figures. Elsewhere (logs, pipes), one plain line per epoch.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

#include "core/model/loss.hpp"

namespace distrain {

struct EpochReport {
  int64_t epoch = 0;  // 1-based
  int64_t step = 0;
  int64_t batches = 0;  // done in this epoch (fewer than the epoch's when train.steps ends it)
  LossStats train, validation;  // validation.count == 0 when not validated
  double learning_rate = 0.0, images_per_sec = 0.0, seconds = 0.0;
};

class Progress {
 public:
  // out == nullptr: print nothing (workers other than rank 0).
  Progress(std::FILE* out, bool interactive, int64_t epochs, int64_t batches_per_epoch);
  void begin_epoch(int64_t epoch);  // 0-based
  // After each batch: batches done in the epoch, the epoch's running metrics.
  void update(int64_t batches_done, const LossStats& running, double images_per_sec, double seconds);
  void end_epoch(const EpochReport& report);

 private:
  std::FILE* out_;
  bool interactive_;
  int64_t epochs_, batches_;
  int64_t epoch_ = 0;
  std::chrono::steady_clock::time_point last_draw_{};
};

std::string format_duration(double seconds);  // 0:03, 1:02:03

}  // namespace distrain
