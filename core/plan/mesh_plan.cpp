#include "core/plan/mesh_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/base/host_memory.hpp"
#include "core/comm/mesh.hpp"
#include "core/model/model.hpp"
#include "core/model/no_storage.hpp"
#include "core/model/stage_partition.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/mesh_strategy.hpp"
#include "core/strategy/replica.hpp"
#include "core/strategy/shard_layout.hpp"
#include "core/strategy/zero_memory.hpp"

namespace distrain {

namespace {

// "[:, 512:1024]": the slice of a variable, numpy style; a grouped axis (attention's query,
// key and value columns) lists its block of each group: "[:, 0:64+128:192+256:320]".
std::string slice_text(const Variable& v) {
  std::string s = "[";
  for (int i = 0; i < v.full_shape.rank(); ++i) {
    if (i) s += ", ";
    if (i != v.slice.axis) {
      s += ":";
      continue;
    }
    const int64_t group = v.full_shape[i] / v.slice.groups;
    const int64_t begin = slice_begin(group, v.slice.index, v.slice.count), end = slice_begin(group, v.slice.index + 1, v.slice.count);
    for (int g = 0; g < v.slice.groups; ++g) s += fmt::format("{}{}:{}", g ? "+" : "", g * group + begin, g * group + end);
  }
  return s + "]";
}

// How `distrain check` names a layer's part in the tensor plan.
const char* split_text(const Layer& l) {
  if (l.type() == "tensor_gather") return "gathers";
  if (l.type() == "sequence_scatter") return "cuts the sequence";
  if (l.type() == "sequence_gather") return "gathers the sequence";
  if (l.tensor_place().sequence && l.tensor_place().split == TensorSplit::none) return "on a sequence shard";
  if (l.tensor_place().vocabulary) return "by vocabulary";
  switch (l.tensor_place().split) {
    case TensorSplit::column: return "column";
    case TensorSplit::row: return "row";
    case TensorSplit::sliced: return "on the slice";
    case TensorSplit::heads: return "by heads";
    case TensorSplit::none: break;
  }
  return "whole";
}

// Why the recipe's model cannot split its vocabulary over its tensor axis, or "".
std::string vocabulary_obstacle_of(const Recipe& recipe) {
  const Model whole(recipe.model(), backend_for(Device{}), storage_free_seams());
  std::vector<std::vector<int>> inputs;
  for (size_t i = 0; i < whole.layers().size(); ++i) inputs.push_back(whole.layer_inputs(i));
  return vocabulary_obstacle(whole.layers(), inputs, static_cast<int>(recipe.strategy.mesh.tensor));
}

// Whether the vocabulary splits over the tensor axis (core/model/tensor_plan.hpp), and why not.
std::string vocabulary_text(const Recipe& recipe, const Model& whole) {
  if (whole.output_first_class())
    return "split over the tensor axis: the embeddings' rows and the head's classes, the logits never gathered, the "
           "cross-entropy combined from the slices";
  const std::string why = vocabulary_kept_whole(recipe);
  return "whole on every rank: " + (why.empty() ? vocabulary_obstacle_of(recipe) : why);
}

// A model of tensor rank t (of `degree`) holding `part` of the layers, recomputing as the
// recipe says (its activation bytes count one block's then), in its precision (bf16's
// operand copies count as transient bytes). Its layout only: no storage, so that a model
// bigger than this machine is weighed as fast as a small one.
std::unique_ptr<Model> model_of(const Recipe& recipe, int t, int degree, ModelPart part = {}) {
  auto m = std::make_unique<Model>(recipe.model(), backend_for(Device{}), storage_free_seams(),
                                   tensor_group_of(recipe, t, degree), part);
  m->set_recompute(recipe.train.recompute_blocks);
  m->set_precision(recipe.train.matmul_dtype);
  return m;
}

StagePlace place_of(const Recipe& recipe, const StagePlan& plan, int stage) {
  const StrategySpec& s = recipe.strategy;
  return StagePlace{plan.part(stage), stage, plan.stages(), static_cast<int>(s.mesh.micro_batches), parse_pipe_schedule(s.mesh.schedule)};
}

// The stages: their layers and share of the estimated cost.
void print_stages(std::FILE* out, const Recipe& recipe, const Model& whole, const StagePlan& plan) {
  double total = 0;
  for (double c : plan.cost) total += c;
  fmt::print(out, "pipeline    {} stage(s), {} micro-batch(es) of each per-replica batch, schedule {}\n", plan.stages(),
             recipe.strategy.mesh.micro_batches, recipe.strategy.mesh.schedule);
  for (int st = 0; st < plan.stages(); ++st) {
    const size_t first = plan.first[static_cast<size_t>(st)], end = plan.first[static_cast<size_t>(st) + 1];
    fmt::print(out, "  stage {}   {} .. {} ({} layer(s)), {:.1f}% of the estimated cost\n", st, whole.layers()[first]->name(),
               whole.layers()[end - 1]->name(), end - first, total > 0 ? 100.0 * plan.cost[static_cast<size_t>(st)] / total : 0.0);
  }
}

// shard_optimizer: slots for the rank's shard; the values as GatherUpdates holds them
// (sharded_masters: float32 masters of the shard, perhaps in host memory, beside bf16 whole
// values) and whole gradients with a shard and one layer's bucket
// (core/strategy/zero_gatherers.hpp, zero_reducers.hpp).
RankBytes rank_bytes(const Recipe& recipe, const MeshShape& shape, const Model& m, const StagePlace& place) {
  const auto element = static_cast<int64_t>(dtype_size(ParamArena::kDType));
  const int64_t arena = m.params().trainable_arena_size(), values = arena * element;
  const int64_t state = m.params().state().numel() * element;
  const bool offload = recipe.strategy.mesh.offload_optimizer, masters = sharded_masters(recipe);
  int64_t updated = values, held = values + m.parameter_copy_bytes(), gradients = values, on_host = 0;
  if (recipe.strategy.mesh.shard_optimizer) {
    const ShardLayout layout(m.trainable_ranges(), shape.data);
    updated = layout.size() * element;
    const ShardedValues how{masters, masters && offload};
    const GatheredValueBytes g = gather_updates_bytes(m.trainable_ranges(), arena, shape.data, how);
    held = g.device + (masters ? 0 : m.parameter_copy_bytes());  // the masters' bf16 copies are the gatherer's
    on_host = g.host;
    gradients += (layout.size() + layout.bucket_size()) * element;
  }
  const int64_t slots = static_cast<int64_t>(make_optimizer(recipe.optimizer)->slots().size()) * updated;
  const int64_t activations = stage_activation_bytes(m, place, recipe.strategy.per_replica_batch);
  return RankBytes{held + state, gradients + m.tied_gradient_bytes(), offload ? 0 : slots, activations,
                   (offload ? slots : 0) + on_host, values};
}

const char* offloaded_state(const Recipe& recipe) {
  return sharded_masters(recipe) ? "optimizer state and float32 master weights" : "optimizer state";
}

// Returns the rank's predicted device total.
int64_t print_rank(std::FILE* out, const Recipe& recipe, const MeshShape& shape, int rank, const Model& m, const StagePlace& place) {
  const MeshCoord c = coord_of(shape, rank);
  const RankBytes b = rank_bytes(recipe, shape, m, place);
  const int64_t budget = recipe.strategy.device_memory;
  fmt::print(out, "rank {:<6}data {}, tensor {}, pipeline {}: parameters {}, gradients {}, optimizer {}, activations {}; "
             "device total {}{}{}\n",
             rank, c.data, c.tensor, c.pipeline, format_mib(b.parameters), format_mib(b.gradients), format_mib(b.optimizer),
             format_mib(b.activations), format_mib(b.total()),
             budget > 0 && b.total() > budget ? fmt::format(", over strategy.device_memory = {}", format_bytes(budget)) : "",
             b.offloaded ? fmt::format(" ({} in host memory: {})", offloaded_state(recipe), format_mib(b.offloaded)) : "");
  for (const Variable& v : m.params().variables())
    if (v.slice.sliced()) fmt::print(out, "            {}/{} {} of {}\n", v.layer, v.name, slice_text(v), v.full_shape.str());
  return b.total();
}

// f(rank, its model, its stage's place) for every rank of the mesh in order, with one model
// per (stage, tensor rank): the data ranks hold the same.
void for_each_rank(const Recipe& recipe, const MeshShape& shape, const StagePlan& plan,
                   const std::function<void(int, const Model&, const StagePlace&)>& f) {
  std::map<std::pair<int, int>, std::unique_ptr<Model>> models;
  for (int r = 0; r < shape.size(); ++r) {
    const MeshCoord c = coord_of(shape, r);
    auto& m = models[{c.pipeline, c.tensor}];
    if (!m) m = model_of(recipe, c.tensor, shape.tensor, plan.part(c.pipeline));
    f(r, *m, place_of(recipe, plan, c.pipeline));
  }
}

MeshShape shape_of(const StrategySpec& s) {
  return MeshShape{static_cast<int>(s.mesh.data), static_cast<int>(s.mesh.tensor), static_cast<int>(s.mesh.pipeline)};
}

}  // namespace

int64_t print_mesh_plan(std::FILE* out, const Recipe& recipe) {
  const StrategySpec& s = recipe.strategy;
  const MeshShape shape = shape_of(s);
  fmt::print(out, "mesh        {} = {} ranks (tensor innermost); launch with mpirun -np {}\n", shape.str(), shape.size(),
             shape.size());
  const std::unique_ptr<Model> whole = model_of(recipe, 0, shape.tensor);
  std::string split;
  for (const auto& l : whole->layers())
    if (l->tensor_place().split != TensorSplit::none || l->tensor_place().sequence || l->type() == "tensor_gather" ||
        l->type() == "sequence_scatter" || l->type() == "sequence_gather")
      split += fmt::format("{}{} ({})", split.empty() ? "" : ", ", l->name(), split_text(*l));
  fmt::print(out, "tensor      {}\n", split.empty() ? "no layer splits: every layer is whole on every rank" : split);
  if (shape.tensor > 1) fmt::print(out, "vocabulary  {}\n", vocabulary_text(recipe, *whole));
  const StagePlan plan = plan_stages(*whole, shape.pipeline, s.mesh.stage_boundaries, recipe.file);
  print_stages(out, recipe, *whole, plan);
  int64_t largest = 0;
  for_each_rank(recipe, shape, plan, [&](int r, const Model& m, const StagePlace& place) {
    largest = std::max(largest, print_rank(out, recipe, shape, r, m, place));
  });
  return largest;
}

std::vector<RankBytes> mesh_rank_bytes(const Recipe& recipe) {
  const MeshShape shape = shape_of(recipe.strategy);
  const std::unique_ptr<Model> whole = model_of(recipe, 0, shape.tensor);
  const StagePlan plan = plan_stages(*whole, shape.pipeline, recipe.strategy.mesh.stage_boundaries, recipe.file);
  std::vector<RankBytes> bytes;
  for_each_rank(recipe, shape, plan,
                [&](int, const Model& m, const StagePlace& place) { bytes.push_back(rank_bytes(recipe, shape, m, place)); });
  return bytes;
}

}  // namespace distrain
