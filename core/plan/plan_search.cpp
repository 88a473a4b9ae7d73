#include "core/plan/plan_search.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "core/strategy/zero_memory.hpp"

namespace distrain {


int64_t model_value_bytes(const Recipe& base, int64_t global_batch) {
  return mesh_rank_bytes(layout_recipe(base, PlanLayout{}, global_batch)).at(0).values;
}

RankBytes largest_rank(const Recipe& r, const PlanLayout& l) {
  if (l.zero_stage > 0) {
    const MemoryUse m = zero_memory_per_replica(r, l.data);
    return RankBytes{m.parameters, m.gradients, m.optimizer, m.activations, m.offloaded,
                     model_value_bytes(r, r.strategy.per_replica_batch)};
  }
  RankBytes largest;
  for (const RankBytes& b : mesh_rank_bytes(r)) {
    const int64_t values = std::max(largest.values, b.values);
    if (b.total() > largest.total()) largest = b;
    largest.values = values;
  }
  return largest;
}

namespace {

// Each layout's memory; refused layouts keep the model's reason.
std::vector<Candidate> memory_of_layouts(const Recipe& base, const Cluster& cluster, int64_t global_batch,
                                    const std::vector<bool>& precisions) {
  std::vector<Candidate> out;
  const ModelSpec& spec = base.model();
  for (const PlanLayout& l : enumerate_layouts(cluster, global_batch, spec.blocks, spec.layers.size(), precisions)) {
    Candidate c{l};
    try {
      const RankBytes b = largest_rank(layout_recipe(base, l, global_batch), l);
      c.peak = b.total();
      c.values = b.values;
      c.fits = base.strategy.device_memory == 0 || c.peak <= base.strategy.device_memory;
    } catch (const UserError& e) {
      c.refused = e.what();
    }
    out.push_back(std::move(c));
  }
  return out;
}

// Accumulation only trades time for memory: a layout keeps it where the same layout with
// fewer micro-batches does not fit.
void drop_needless_accumulation(std::vector<Candidate>& all) {
  const auto fits_with_fewer = [&](const Candidate& c) {
    return c.layout.accumulates() && std::any_of(all.begin(), all.end(), [&](const Candidate& o) {
             PlanLayout fewer = c.layout;
             fewer.micro_batches = o.layout.micro_batches;
             return o.fits && o.layout.micro_batches < c.layout.micro_batches && o.layout == fewer;
           });
  };
  std::vector<Candidate> kept;
  for (const Candidate& c : all)
    if (!fits_with_fewer(c)) kept.push_back(c);
  all = std::move(kept);
}

// Why the chosen layout's tensor axis is where it is: layouts keep it inside a host, off the
// hosts' link, which measured links may show no slower.
std::string tensor_reason(const Cluster& cluster, const Links& links) {
  if (cluster.hosts == 1) return "tensor parallelism splits each layer's work over the ranks";
  const double slower = links.intra_bytes_per_s / links.inter_bytes_per_s;
  return slower >= 1.5 ? fmt::format("tensor parallelism stays inside a host (the inter-host link is {:.0f}x slower than "
                                     "the intra-host one)", slower)
                       : fmt::format("tensor parallelism stays inside a host, where its collectives at every layer "
                                     "cross no host's link (here {:.3g} GB/s, the inter-host link {:.3g} GB/s)",
                                     links.intra_bytes_per_s / 1e9, links.inter_bytes_per_s / 1e9);
}

}  // namespace

std::string reason(const std::vector<Candidate>& all, const Candidate& best, const Cluster& cluster, const Links& links) {
  std::vector<std::string> why;
  const auto plain = std::find_if(all.begin(), all.end(), [](const Candidate& c) {
    const PlanLayout& l = c.layout;
    return l.tensor == 1 && l.pipeline == 1 && !l.shard_optimizer && l.zero_stage == 0 && !l.offload && !l.recompute &&
           !l.accumulates() && c.refused.empty();
  });
  if (plain != all.end())
    why.push_back(plain->fits ? "the model fits one device"
                              : fmt::format("the model does not fit one device ({} predicted per rank without sharding)",
                                            format_bytes(plain->peak)));
  const PlanLayout& l = best.layout;
  if (l.tensor == 1 && l.pipeline == 1) why.push_back("data parallelism alone is the fastest layout that fits");
  if (l.tensor > 1) why.push_back(tensor_reason(cluster, links));
  if (l.pipeline > 1) why.push_back(fmt::format("{} pipeline stages send only activations between them", l.pipeline));
  if (l.shard_optimizer) why.push_back("the optimizer state is sharded over the data ranks (ZeRO-1)");
  if (l.zero_stage == 2) why.push_back("the optimizer state and gradients are sharded over the data ranks (ZeRO-2)");
  if (l.zero_stage == 3) why.push_back("the optimizer state, gradients and weights are sharded over the data ranks (ZeRO-3)");
  if (l.accumulates())
    why.push_back(fmt::format("each data rank's batch runs as {} micro-batches whose gradients accumulate (the layout "
                              "does not fit with fewer)", l.micro_batches));
  if (l.recompute) why.push_back("block activations are recomputed");
  if (l.offload) why.push_back("the optimizer state lives in host memory");
  if (l.bf16) why.push_back("matrix products take bf16 operands and layer outputs are kept in bf16 (weights and optimizer "
                            "state stay float32)");
  return fmt::format("{}", fmt::join(why, "; "));
}

std::vector<Candidate> weigh_memory(const Recipe& base, const Cluster& cluster, int64_t global_batch,
                                    const std::vector<bool>& precisions) {
  std::vector<Candidate> all = memory_of_layouts(base, cluster, global_batch, precisions);
  drop_needless_accumulation(all);
  return all;
}

std::vector<std::pair<int64_t, bool>> profiles_needed(const std::vector<Candidate>& candidates, int64_t global_batch) {
  std::set<std::pair<int64_t, bool>> needed;
  for (const Candidate& c : candidates)
    if (c.fits) needed.insert({global_batch / c.layout.data / c.layout.micro_batches, c.layout.bf16});
  return {needed.begin(), needed.end()};
}

void weigh_time(const Recipe& base, const Cluster& cluster, const Links& links, int64_t global_batch,
                const LayerTimesBy& profiles, const CoreSharing& cores, std::vector<Candidate>& candidates) {
  for (Candidate& c : candidates) {
    if (!c.fits) continue;
    const Recipe r = layout_recipe(base, c.layout, global_batch);
    const int64_t micro = global_batch / c.layout.data / c.layout.micro_batches;
    c.step = estimate_step(r, c.layout, cluster, links, profiles.at({micro, c.layout.bf16}), c.values, cores);
  }
  const auto key = [](const Candidate& c) {
    return std::tuple(!c.fits, c.fits ? std::round(std::log(c.step.total_ms()) / std::log(1.02)) : 0.0, c.layout.options(),
                      c.fits ? c.step.total_ms() : static_cast<double>(c.peak));
  };
  std::stable_sort(candidates.begin(), candidates.end(), [&](const Candidate& x, const Candidate& y) { return key(x) < key(y); });
}

double tokens_per_example(const Recipe& recipe) {
  return recipe.model().input_dtype == DType::i32 ? static_cast<double>(recipe.model().input_shape.numel()) : 1.0;
}

}  // namespace distrain
