// Steps timed as `distrain bench` times them (cli/cmd_bench.cpp), for `distrain plan`: the
// per-layer profile of one device its step-time model is built on, and a whole job's step
// that `plan --measure` calibrates the model's compute against.
#pragma once
#include <cstdint>

#include "core/io/recipe.hpp"
#include "core/train/step_profile.hpp"

namespace distrain::cli {

// `recipe` must be a one_device recipe; `steps` timed after `warmup`.
StepProfile profile_on_one_device(const Recipe& recipe, int64_t steps, int64_t warmup);

// The median of `steps` steps of `recipe` after `warmup`, on the ranks of the job this
// process was launched in (every rank calls it): rank 0's median, which waits for every
// rank's part of a step.
double median_step_ms_in_job(const Recipe& recipe, int64_t steps, int64_t warmup);

}  // namespace distrain::cli
