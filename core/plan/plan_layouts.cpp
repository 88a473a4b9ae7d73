#include "core/plan/plan_layouts.hpp"

#include <fmt/format.h>

#include <functional>
#include <memory>

#include "core/base/error.hpp"
#include "core/io/strategy_kind.hpp"

namespace distrain {

namespace {

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) out.push_back(k);
  return out;
}

// Micro-batches a pipeline of `stages` may split a data rank's `batch` into: as many as
// stages (the least that fills it), twice and four times that (a smaller bubble); without
// a pipeline 1, 2 or 4 (gradient accumulation: a micro-batch's activations at a time).
std::vector<int64_t> micro_batch_choices(int stages, int64_t batch) {
  std::vector<int64_t> out;
  for (const int64_t m : {1, 2, 4})
    if (batch % (m * stages) == 0) out.push_back(m * stages);
  return out;
}

// The strategy keys a layout keeps from the recipe: those that are not about the layout.
constexpr const char* kKeptStrategyKeys[] = {"threads", "check_every", "device_memory", "timeout_seconds"};

// The [train] keys a layout sets, in the order --set lists them.
constexpr const char* kLayoutTrainKeys[] = {"accumulate_steps", "recompute", "precision"};
toml::table layout_train(const PlanLayout& l) {
  toml::table train{{"recompute", l.recompute ? "blocks" : "none"}, {"precision", l.bf16 ? "bf16" : "float32"}};
  if (l.zero_stage > 0 && l.micro_batches > 1) train.insert("accumulate_steps", l.micro_batches);  // zero's accumulation
  return train;
}

// `base` with its [strategy] replaced by `strategy` (plus the kept keys) and the layout's
// [train] keys.
Recipe with_strategy(const Recipe& base, toml::table strategy, const PlanLayout& l) {
  toml::table table = *base.table;
  if (const toml::table* old = table["strategy"].as_table()) {
    for (const char* key : kKeptStrategyKeys)
      if (const toml::node* v = old->get(key)) strategy.insert(key, *v);
    // A vocabulary kept whole stays whole where there is a tensor axis to split it over.
    if (old->get("vocab_parallel") && !(*old)["vocab_parallel"].value_or(true) && strategy["tensor"].value_or(int64_t{1}) > 1)
      strategy.insert("vocab_parallel", false);
  }
  table.insert_or_assign("strategy", std::move(strategy));
  if (!table["train"].as_table()) table.insert_or_assign("train", toml::table{});
  toml::table& train = *table["train"].as_table();
  train.erase("accumulate_steps");  // the layout's batch per data rank is the whole step's, unless it says
  for (auto&& [key, value] : layout_train(l)) train.insert_or_assign(key, value);
  return recipe_from_table(std::make_shared<const toml::table>(std::move(table)), base.file);
}

toml::table layout_strategy(const PlanLayout& l, int64_t global_batch) {
  toml::table strategy;
  if (l.zero_stage > 0) {
    // zero's per_replica_batch is one accumulated micro-batch (train.accumulate_steps).
    strategy = toml::table{{"name", "zero"}, {"stage", l.zero_stage}, {"per_replica_batch", global_batch / l.data / l.micro_batches}};
  } else {
    strategy = toml::table{{"name", "mesh"}, {"data", l.data}, {"tensor", l.tensor}, {"pipeline", l.pipeline},
                           {"per_replica_batch", global_batch / l.data}};
    if (l.micro_batches > 1) strategy.insert("micro_batches", l.micro_batches);
    if (l.shard_optimizer) strategy.insert("shard_optimizer", true);
    if (l.sequence_parallel) strategy.insert("sequence_parallel", true);
  }
  if (l.offload) strategy.insert("offload_optimizer", true);
  return strategy;
}

}  // namespace

std::string PlanLayout::str() const {
  std::string s = fmt::format("data {}", data);
  if (tensor > 1) s += fmt::format(" x tensor {}", tensor);
  if (pipeline > 1) s += fmt::format(" x pipeline {} ({} micro-batches)", pipeline, micro_batches);
  if (sequence_parallel) s += ", SP";
  if (shard_optimizer) s += ", ZeRO-1";
  if (zero_stage > 0) s += fmt::format(", ZeRO-{}", zero_stage);
  if (accumulates()) s += fmt::format(", accumulate {}", micro_batches);
  if (recompute) s += ", recompute";
  if (offload) s += ", offload";
  if (bf16) s += ", bf16";
  return s;
}

int PlanLayout::options() const {
  return shard_optimizer + sequence_parallel + recompute + offload + bf16 + accumulates() + (zero_stage > 0) + (tensor > 1) +
         (pipeline > 1);
}

std::vector<PlanLayout> enumerate_layouts(const Cluster& cluster, int64_t global_batch, int blocks, size_t layers,
                                          const std::vector<bool>& precisions) {
  std::vector<PlanLayout> out;
  for (const bool bf16 : precisions)
    for (const int t : divisors(cluster.per_host()))
      for (const int p : divisors(cluster.ranks / t)) {
        if (static_cast<size_t>(p) > layers) continue;
        const int d = cluster.ranks / (t * p);
        if (global_batch % d != 0) continue;
        for (const int64_t m : micro_batch_choices(p, global_batch / d))
          for (int options = 0; options < 16; ++options) {  // shard, SP, recompute, offload: bits 3..0
            const bool shard = options & 8, sp = options & 4, recompute = options & 2, offload = options & 1;
            if ((shard && d == 1) || (sp && t == 1) || (recompute && blocks == 0)) continue;
            out.push_back(PlanLayout{d, t, p, m, shard, sp, recompute, offload, 0, bf16});
          }
        // ZeRO-2 and -3 shard the gradients (and the weights) over the data axis alone.
        if (d == 1 || t > 1 || p > 1) continue;
        for (const int64_t m : micro_batch_choices(1, global_batch / d))
          for (const int stage : {2, 3})
            for (const bool recompute : {false, true})
              for (const bool offload : {false, true})
                if (!recompute || blocks > 0) out.push_back(PlanLayout{d, 1, 1, m, false, false, recompute, offload, stage, bf16});
      }
  return out;
}

Recipe layout_recipe(const Recipe& base, const PlanLayout& l, int64_t global_batch) {
  return with_strategy(base, layout_strategy(l, global_batch), l);
}

std::vector<std::string> layout_overrides(const PlanLayout& l, int64_t global_batch) {
  const auto text = [](const toml::node& value) -> std::string {
    if (const auto* s = value.as_string()) return toml_quoted(s->get());
    if (const auto* i = value.as_integer()) return std::to_string(i->get());
    if (const auto* b = value.as_boolean()) return b->get() ? "true" : "false";
    return "";
  };
  std::vector<std::string> out;
  for (const auto& [key, value] : layout_strategy(l, global_batch)) out.push_back(fmt::format("strategy.{}={}", key.str(), text(value)));
  const toml::table train = layout_train(l);
  for (const char* key : kLayoutTrainKeys)
    if (const toml::node* value = train.get(key)) out.push_back(fmt::format("train.{}={}", key, text(*value)));
  return out;
}

Recipe profile_recipe(const Recipe& base, int64_t batch, bool bf16, int threads, int64_t blocks) {
  PlanLayout precision;
  precision.bf16 = bf16;
  const Recipe one = with_strategy(base, toml::table{{"name", "one_device"}, {"per_replica_batch", batch}}, precision);
  toml::table table = *one.table;
  table["strategy"].as_table()->erase("device_memory");  // time is measured here, memory weighed apart
  table["strategy"].as_table()->insert_or_assign("threads", int64_t{threads});  // kept by a layout_recipe of it
  if (toml::array* layers = table["model"]["layers"].as_array(); layers && blocks > 0)
    for (toml::node& node : *layers)
      if (toml::table* layer = node.as_table(); layer && (*layer)["type"].value<std::string>() == "repeat")
        if ((*layer)["count"].value<int64_t>().value_or(0) > blocks) layer->insert_or_assign("count", blocks);
  return recipe_from_table(std::make_shared<const toml::table>(std::move(table)), base.file);
}

std::string profiled_stand_in(const std::string& name, const std::function<bool(const std::string&)>& profiled) {
  if (profiled(name)) return name;
  // "<repeat>.<k>.<layer>": the outermost copy index is the first number between dots.
  for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
    const size_t end = name.find('.', dot + 1);
    if (end == std::string::npos) break;
    const std::string k = name.substr(dot + 1, end - dot - 1);
    if (k.empty() || k.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string last = name.substr(0, dot + 1) + std::to_string(kProfiledBlocks - 1) + name.substr(end);
    return profiled(last) ? last : "";
  }
  return "";
}

int64_t recipe_global_batch(const Recipe& recipe, int ranks) {
  return recipe.step_batch() * recipe.strategy.kind().replicas(recipe.strategy, ranks);
}

}  // namespace distrain
