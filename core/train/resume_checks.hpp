// A checkpoint resumes the run that wrote it: the same data, the same vocabulary and a
// model that computes the same function. Anything else would go on silently as if it were
// this run's (a synthetic run's folder reused for Fashion-MNIST, a text whose characters
// differ at the same count, heads = 2 over a 4-head model's weights of the same shapes).
// Each mismatch is a UserError naming the checkpoint and the key; checkpoint.init_from
// (weights only) is the way to start from another run's model.
#pragma once
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "datasets/dataset.hpp"

namespace distrain {

void check_resumable(const Recipe& recipe, const Dataset& data, const CheckpointHeader& header);

}  // namespace distrain
