// The layouts `distrain plan` weighs for a recipe on a cluster: every mesh (data x tensor x
// pipeline = ranks, tensor inside a host, as Megatron places it) with the options that
// trade memory for time (optimizer sharding, sequence parallelism, recomputation, offload,
// micro-batches or gradient accumulation, precision), and on the data axis alone ZeRO
// stages 2 and 3, all for the recipe's global batch. A layout becomes a mesh or zero recipe.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/io/recipe.hpp"

namespace distrain {

struct Cluster {
  int ranks = 1, hosts = 1;
  int per_host() const { return ranks / hosts; }
  int host_of(int rank) const { return rank / per_host(); }
};

struct PlanLayout {
  int data = 1, tensor = 1, pipeline = 1;
  // Of each data rank's batch: a pipeline's micro-batches, or without a pipeline gradient
  // accumulation's (strategy.micro_batches of the mesh, train.accumulate_steps of zero).
  int64_t micro_batches = 1;
  bool shard_optimizer = false, sequence_parallel = false, recompute = false, offload = false;
  int zero_stage = 0;         // 2 or 3: strategy "zero" at that stage (data only); 0: the mesh
  bool bf16 = false;          // train.precision = "bf16"
  std::string str() const;    // "data 2 x tensor 2, ZeRO-1, recompute"
  int options() const;        // how many of tensor, pipeline and the options it uses
  bool accumulates() const { return pipeline == 1 && micro_batches > 1; }
  bool operator==(const PlanLayout&) const = default;
};

// Every layout for `cluster` and a global batch of `global_batch` examples, on a model of
// `blocks` repeat blocks (0: recomputation not offered) and `layers` layers (the most
// pipeline stages), in each precision of `precisions` (train.precision is bf16 or not).
// Layouts whose data degree does not divide the batch are left out.
std::vector<PlanLayout> enumerate_layouts(const Cluster& cluster, int64_t global_batch, int blocks, size_t layers,
                                          const std::vector<bool>& precisions = {false});

// The recipe of `layout`: `base` as strategy "mesh" (or "zero") with the layout's keys
// (other strategies' keys and train.accumulate_steps dropped: a data rank's batch is the
// global batch / data) and its train.recompute and train.precision (and a zero layout's
// train.accumulate_steps).
Recipe layout_recipe(const Recipe& base, const PlanLayout& layout, int64_t global_batch);
// The --set overrides that make a one_device recipe (without train.accumulate_steps) this
// layout: strategy.name="mesh", strategy.data=2, ...
std::vector<std::string> layout_overrides(const PlanLayout& layout, int64_t global_batch);
// The recipe the step times are profiled on: `base` on one device with a batch of `batch`,
// in bf16 or float32, `threads` CPU threads and no strategy.device_memory, each outermost
// repeat block cut to `blocks` copies (0: none cut), by default kProfiledBlocks, so that a
// model too big for one device is measured too, and quickly (its other blocks take the
// times of the last copy kept: profiled_stand_in).
inline constexpr int64_t kProfiledBlocks = 2;
Recipe profile_recipe(const Recipe& base, int64_t batch, bool bf16, int threads, int64_t blocks = kProfiledBlocks);
// The layer of the profiled model whose times stand for layer `name` of the whole one:
// itself, or for a block copy the profile cut ("h.9.attn"), the same layer of the last copy
// kept ("h.1.attn"); "" when neither was profiled. `profiled` says whether a name was.
std::string profiled_stand_in(const std::string& name, const std::function<bool(const std::string&)>& profiled);

// The examples of one optimizer step of `recipe` when launched on `ranks` processes.
int64_t recipe_global_batch(const Recipe& recipe, int ranks);

}  // namespace distrain
