// StepProfile: where a training step's time goes, for `distrain bench --profile`: each
// layer's forward and backward calls on this process's first replica, the gradient
// reduction (Strategy::train_step's reduce phase, with its check that the gradients are
// finite), the optimizer update, and (other) for the rest of the step (loss, zeroing
// gradients, waiting for the other replicas' threads or workers). Each row is the
// median over the timed steps; a row's share is of the sum of the rows, so the shares add
// up to 100% and (other) is what the named rows did not cover.
#pragma once
#include <string>
#include <vector>

#include "core/base/json.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/step_timing.hpp"

namespace distrain {

struct ProfileRow {
  std::string name, type;  // a layer's; "(update)", "(reduction)", "(other)" with no type
  double forward_ms = 0, backward_ms = 0;  // a row that is not a layer has its time in backward_ms
  double share = 0;                        // of the sum of all rows' ms, 0..1
};

struct StepProfile {
  std::vector<ProfileRow> rows;  // layers in order, then (update), (reduction), (other)
  std::string strategy;
  int64_t steps = 0;
  double step_ms = 0;  // the median step, whole
  std::string not_profiled;  // why this strategy has no rows; "" when it has
};

// Why `strategy` cannot be profiled (its layers' calls would hide collectives, or its
// update runs elsewhere), or "" when it can: one_device, mirrored, multi_worker_mirrored,
// central_storage.
std::string why_not_profiled(const Strategy& strategy);

// The profile of the steps after `warmup`, timed by time_steps with a LayerClock on
// strategy.model(); a strategy that why_not_profiled() refuses gets only not_profiled.
StepProfile profile_steps(Strategy& strategy, const std::vector<StepTime>& times, int64_t warmup);

// The table `bench --profile` prints (several lines, each ending in a newline).
std::string profile_table(const StepProfile& profile);
// The "profile" array of `bench --profile --json`: one object per row.
Json profile_json(const StepProfile& profile);

}  // namespace distrain
