// The per-layer time of a recipe's step on one device, as `distrain bench --profile`
// measures it (cli/cmd_bench.cpp); `distrain plan` builds its step-time model on it.
#pragma once
#include <cstdint>

#include "core/io/recipe.hpp"
#include "core/train/step_profile.hpp"

namespace distrain::cli {

// `recipe` must be a one_device recipe; `steps` timed after `warmup`.
StepProfile profile_on_one_device(const Recipe& recipe, int64_t steps, int64_t warmup);

}  // namespace distrain::cli
