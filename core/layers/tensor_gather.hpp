// tensor_gather: the model puts one where a column-parallel layer's slice meets a layer
// that needs it whole (not a recipe type). Forward: every rank's slice of the last axis,
// (N, ..., c / degree), all-gathered into (N, ..., c) in channel order, so that an NHWC
// image has whole channels at every pixel (flatten then sees Keras's order). Backward: the
// output gradient is the same on every rank (whole), so each keeps its own slice; nothing
// is exchanged.
#pragma once
#include <memory>

#include "core/layers/layer.hpp"

namespace distrain {

std::unique_ptr<Layer> make_tensor_gather(const TensorPlace& place);

}  // namespace distrain
