// tensor_gather: the model puts one after a column-parallel layer whose output the next
// layer needs whole (not a recipe type). Forward: every rank's slice of the features,
// (N, f / degree), all-gathered into (N, f) in feature order. Backward: the output gradient
// is the same on every rank (whole), so each keeps its own columns; nothing is exchanged.
#pragma once
#include <memory>

#include "core/layers/layer.hpp"

namespace distrain {

std::unique_ptr<Layer> make_tensor_gather(const TensorPlace& place);

}  // namespace distrain
