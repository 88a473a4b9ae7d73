// time_steps: the measurement of `distrain bench`: steps of the training loop, StepLoop as
// `train` runs it, on one batch given again at every step, each step (or window of steps)
// timed. No run folder, checkpoint, metrics, validation or progress; a loss that stops
// being finite does not stop the run (only the time counts). Given a LayerClock, each
// step's time per layer too (`bench --profile`).
#pragma once
#include <vector>

#include "core/io/recipe.hpp"
#include "core/model/layer_clock.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

struct StepTime {
  double ms = 0;         // Strategy::train_step, whole
  double reduce_ms = 0;  // of which the gradient reduction
  CommTraffic data, tensor;  // what this rank's collectives sent in the step (Strategy::data_traffic)
  std::vector<StageFigures> stages;  // pipeline stages (Strategy::stage_figures)
  double update_ms = 0;  // of which the optimizer update
  LayerMillis layers;    // with a LayerClock: the layers of the strategy's model(); else empty
};

struct TimingPlan {
  int64_t warmup = 0, steps = 0;  // untimed steps first (each waits for its figures), then the timed ones
  // Timed steps whose figures are read together, 1..StepLedger::kCapacity. Above 1 (a GPU,
  // where a read stalls the device), each step of a window is given the window's mean
  // time, and its reduce_ms and update_ms are the host's time to queue that work.
  int64_t read_every = 1;
};

// The plan's steps from step 0 with the recipe's schedule and seed; the strategy's
// variables must be initialised. One StepTime per step, in order. A `clock` is given to
// the strategy's model() (this process's first replica) for these steps only.
std::vector<StepTime> time_steps(const Recipe& recipe, Strategy& strategy, const Batch& batch, const TimingPlan& timing,
                                 LayerClock* clock = nullptr);

}  // namespace distrain
