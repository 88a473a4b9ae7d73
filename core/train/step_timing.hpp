// time_steps: the measurement of `distrain bench`: steps of the training loop, StepLoop as
// `train` runs it, on one batch given again at every step, each step timed. No run folder,
// checkpoint, metrics, validation or progress; a loss that stops being finite does not
// stop the run (only the time counts). Given a LayerClock, each step's time per layer too
// (`bench --profile`).
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

// `steps` steps from step 0 with the recipe's schedule and seed; the strategy's variables
// must be initialised. One StepTime per step, in order. A `clock` is given to the
// strategy's model() (this process's first replica) for these steps only.
std::vector<StepTime> time_steps(const Recipe& recipe, Strategy& strategy, const Batch& batch, int64_t steps,
                                 LayerClock* clock = nullptr);

}  // namespace distrain
