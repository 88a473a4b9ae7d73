// The pipeline stages of a model: P runs of consecutive layers (of the list after
// tensor-parallel placement), one per rank of a mesh's pipeline axis. By default the cut
// balances the estimated cost per example, forward plus backward, from the shapes: a layer
// with weights about 6 x its weights x its output positions (2 for the forward
// multiply-adds, twice that for the two backward products), any other layer about 3 x its
// output elements. `stage_boundaries` names the first layer of each stage after the first.
#pragma once
#include <string>
#include <vector>

#include "core/model/model.hpp"

namespace distrain {

struct StagePlan {
  std::vector<size_t> first;  // first[s] .. first[s + 1] - 1 are stage s's layers; first.back() = layers
  std::vector<double> cost;   // per stage, estimated operations per example
  int stages() const { return static_cast<int>(cost.size()); }
  int stage_of(size_t layer) const;
  ModelPart part(int stage) const;
};

// Estimated forward + backward operations per example of each layer of `model` (whole).
std::vector<double> layer_costs(const Model& model);

// Throws UserError naming `file` when there are fewer layers than stages or a boundary is
// not a layer name, out of order or the first layer.
StagePlan plan_stages(const Model& model, int stages, const std::vector<std::string>& boundaries, const std::string& file);

}  // namespace distrain
