#include "cli/mesh_plan.hpp"

#include <fmt/format.h>

#include <memory>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/comm/mesh.hpp"
#include "core/model/model.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/shard_layout.hpp"

namespace distrain::cli {

namespace {

// "[:, 512:1024]": the slice of a variable, numpy style.
std::string slice_text(const Variable& v) {
  std::string s = "[";
  for (int i = 0; i < v.full_shape.rank(); ++i) {
    if (i) s += ", ";
    const int64_t part = v.full_shape[i] / v.slice.count;
    s += i == v.slice.axis ? fmt::format("{}:{}", v.slice.index * part, (v.slice.index + 1) * part) : ":";
  }
  return s + "]";
}

// How `distrain check` names a layer's part in the tensor plan.
const char* split_text(const Layer& l) {
  if (l.type() == "tensor_gather") return "gathers";
  switch (l.tensor_place().split) {
    case TensorSplit::column: return "column";
    case TensorSplit::row: return "row";
    case TensorSplit::sliced: return "on the slice";
    case TensorSplit::none: break;
  }
  return "whole";
}

// Shapes only: a model of tensor rank t with no storage but the batch-norm state.
std::unique_ptr<Model> model_of(const Recipe& recipe, int t, int degree) {
  return std::make_unique<Model>(recipe.model(), recipe.file, backend_for(Device{}), ModelSeams{}, TensorGroup{t, degree});
}

void print_rank(std::FILE* out, const Recipe& recipe, const MeshShape& shape, int rank, const Model& m) {
  const MeshCoord c = coord_of(shape, rank);
  const int64_t values = m.params().values().numel() * 4, state = m.params().state().numel() * 4;
  // shard_optimizer: slots for the rank's shard; a shard and one layer's bucket beside the
  // whole values and gradients (core/strategy/zero_gatherers.hpp, zero_reducers.hpp).
  int64_t updated = values, extra = 0;
  if (recipe.strategy.shard_optimizer) {
    const ShardLayout layout(m.trainable_ranges(), shape.data);
    updated = layout.size() * 4;
    extra = (layout.size() + layout.bucket_size()) * 4;
  }
  const int64_t slots = static_cast<int64_t>(make_optimizer(recipe.optimizer)->slots().size()) * updated;
  fmt::print(out, "rank {:<6}data {}, tensor {}, pipeline {}: bytes of parameters {}, gradients {}, optimizer {}, activations {}\n",
             rank, c.data, c.tensor, c.pipeline, values + state + extra, values + extra, slots,
             m.activation_bytes(recipe.strategy.per_replica_batch));
  for (const Variable& v : m.params().variables())
    if (v.slice.sliced()) fmt::print(out, "            {}/{} {} of {}\n", v.layer, v.name, slice_text(v), v.full_shape.str());
}

}  // namespace

void print_mesh_plan(std::FILE* out, const Recipe& recipe) {
  const StrategySpec& s = recipe.strategy;
  const MeshShape shape{static_cast<int>(s.mesh_data), static_cast<int>(s.mesh_tensor), static_cast<int>(s.mesh_pipeline)};
  fmt::print(out, "mesh        {} = {} ranks (tensor innermost); launch with mpirun -np {}\n", shape.str(), shape.size(),
             shape.size());
  std::vector<std::unique_ptr<Model>> per_tensor_rank;
  for (int t = 0; t < shape.tensor; ++t) per_tensor_rank.push_back(model_of(recipe, t, shape.tensor));
  std::string split;
  for (const auto& l : per_tensor_rank[0]->layers())
    if (l->tensor_place().split != TensorSplit::none || l->type() == "tensor_gather")
      split += fmt::format("{}{} ({})", split.empty() ? "" : ", ", l->name(), split_text(*l));
  fmt::print(out, "tensor      {}\n", split.empty() ? "no layer splits: every layer is whole on every rank" : split);
  for (int r = 0; r < shape.size(); ++r) print_rank(out, recipe, shape, r, *per_tensor_rank[static_cast<size_t>(coord_of(shape, r).tensor)]);
}

}  // namespace distrain::cli
