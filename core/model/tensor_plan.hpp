// The tensor-parallel plan of a model (Megatron's): which layers split over the tensor
// axis of a mesh, and where a split output must be gathered.
//   - Dense layers pair up: the first column-parallel, the next row-parallel, with only
//     element-wise layers (relu, dropout, rescaling) between them, which run on the slice.
//     The pair exchanges nothing inside; the row layer's output is whole again.
//   - A dense layer with nothing to pair with is column-parallel and its output gathered
//     (a tensor_gather layer after it).
//   - A dense layer's `tensor_parallel` = "column" | "row" | "replicated" overrides; "row"
//     needs a column-parallel layer before it.
//   - Every other layer runs whole on every rank of the tensor axis (replicated).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"

namespace distrain {

struct TensorPlanEntry {
  TensorSplit split = TensorSplit::none;
  bool gather_after = false;  // the output is a slice the next layer needs whole
};

// One entry per layer; all none when degree is 1. Throws UserError naming the layer and
// `file` for a request that cannot be met.
std::vector<TensorPlanEntry> plan_tensor_parallel(const std::vector<std::unique_ptr<Layer>>& layers, int degree,
                                                  const std::string& file);

}  // namespace distrain
