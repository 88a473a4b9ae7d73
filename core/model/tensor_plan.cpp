#include "core/model/tensor_plan.hpp"

#include "core/base/error.hpp"
#include "core/base/json.hpp"
#include "core/model/model_spec.hpp"

namespace distrain {

namespace {

using Layers = std::vector<std::unique_ptr<Layer>>;

// The layer list as a graph: whether layer j takes just layer j-1's output, which no other
// layer reads (a slice can run on through it).
class Chain {
 public:
  explicit Chain(const std::vector<std::vector<int>>& inputs) : inputs_(inputs), readers_(readers_of(inputs)) {}
  bool linked(size_t j) const {
    return j > 0 && inputs_[j] == std::vector<int>{static_cast<int>(j) - 1} && readers_[j - 1].size() == 1;
  }

 private:
  const std::vector<std::vector<int>>& inputs_;
  std::vector<std::vector<size_t>> readers_;
};

// The layer after i that does not work per channel, or where the chain from i ends
// (layers.size() when none).
size_t next_not_per_channel(const Layers& layers, const Chain& chain, size_t i) {
  size_t j = i + 1;
  while (j < layers.size() && chain.linked(j) && layers[j]->per_channel()) ++j;
  return j;
}

// Where a lone column layer i's slice is gathered, j being the next layer that needs it
// whole: after the last per-channel layer before j that is not element-wise (pooling
// shrinks what is gathered; batch norm keeps its statistics per slice), else right after i.
size_t gather_point(const Layers& layers, size_t i, size_t j) {
  size_t g = i;
  for (size_t k = i + 1; k < j; ++k)
    if (!layers[k]->elementwise()) g = k;
  return g;
}

bool can_be_row(const Layer& l) {
  return l.can_split(TensorSplit::row) && l.requested_split().value_or(TensorSplit::row) == TensorSplit::row;
}

void mark_sliced(std::vector<TensorPlanEntry>& plan, size_t from, size_t to) {
  for (size_t k = from; k < to; ++k) plan[k].split = TensorSplit::sliced;
}

}  // namespace

namespace {

std::vector<TensorPlanEntry> plan_splits(const Layers& layers, const std::vector<std::vector<int>>& inputs, int degree,
                                         const std::string& file) {
  std::vector<TensorPlanEntry> plan(layers.size());
  if (degree <= 1) return plan;
  const Chain chain(inputs);
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = *layers[i];
    const std::optional<TensorSplit> asked = l.requested_split();
    if (asked == TensorSplit::none || !l.tied_layer().empty()) continue;  // a tied head splits by vocabulary only
    if (l.can_split(TensorSplit::heads)) {
      plan[i].split = TensorSplit::heads;
      continue;
    }
    if (!l.can_split(TensorSplit::column)) continue;
    DT_USER_CHECK(asked != TensorSplit::row, "{}: layer '{}': tensor_parallel = \"row\" needs a column-parallel layer before "
                  "it (with only relu, dropout, rescaling, pooling or batch_norm between)", file, l.name());
    plan[i].split = TensorSplit::column;
    const size_t j = next_not_per_channel(layers, chain, i);
    if (j < layers.size() && chain.linked(j) && can_be_row(*layers[j])) {
      mark_sliced(plan, i + 1, j);
      plan[j].split = TensorSplit::row;
      i = j;
    } else {
      const size_t g = gather_point(layers, i, j);
      mark_sliced(plan, i + 1, g + 1);
      plan[g].gather_after = true;
      i = g;
    }
  }
  return plan;
}

// Embeddings as row layers, the last layer a column layer left ungathered.
void plan_vocabulary(const Layers& layers, std::vector<TensorPlanEntry>& plan) {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i]->type() == "embedding") plan[i].split = TensorSplit::row;
  plan.back() = TensorPlanEntry{TensorSplit::column};
}

bool enters_split(TensorSplit s) { return s == TensorSplit::column || s == TensorSplit::heads; }
bool leaves_split(TensorSplit s) { return s == TensorSplit::row || s == TensorSplit::heads; }

// Marks the layers on sequence shards and where shards are cut and gathered (see header).
void plan_sequence(const Layers& layers, const std::vector<std::vector<int>>& inputs, TensorPlan& plan) {
  const size_t n = layers.size();
  std::vector<TensorPlanEntry>& p = plan.layers;
  auto free = [&](size_t i) { return layers[i]->per_position() && p[i].split == TensorSplit::none; };
  const std::vector<std::vector<size_t>> readers = readers_of(inputs);
  std::vector<bool> wanted(n, false);  // the output feeds a column or attention layer through free layers
  for (size_t j = n; j-- > 0;)
    for (const size_t r : readers[j]) wanted[j] = wanted[j] || enters_split(p[r].split) || (free(r) && wanted[r]);
  std::vector<bool> shard(n, false);  // the output is a shard
  for (size_t i = 0; i < n; ++i) {
    bool any_shard = false;
    for (const int j : inputs[i]) any_shard = any_shard || (j >= 0 && shard[static_cast<size_t>(j)]);
    shard[i] = leaves_split(p[i].split) || (free(i) && (wanted[i] || any_shard));
    const bool reads_shard = enters_split(p[i].split) || (free(i) && shard[i]);
    p[i].sequence = reads_shard || shard[i];
    for (const int j : inputs[i]) {
      const bool is_shard = j >= 0 && shard[static_cast<size_t>(j)];
      if (reads_shard && !is_shard) (j < 0 ? plan.scatter_input : p[static_cast<size_t>(j)].scatter_sequence_after) = true;
      if (!reads_shard && is_shard) p[static_cast<size_t>(j)].gather_sequence_after = true;
    }
  }
  if (n > 0 && shard[n - 1]) p[n - 1].gather_sequence_after = true;
}

}  // namespace

std::string vocabulary_obstacle(const Layers& layers, const std::vector<std::vector<int>>& inputs, int degree) {
  if (layers.empty()) return "the model has no layers";
  const Layer& last = *layers.back();
  bool any_embedding = false;
  for (const auto& l : layers) {
    if (l->type() == "embedding") {
      any_embedding = true;
      if (l->settings().value("input_dim", int64_t{0}) < degree)
        return fmt::format("layer '{}' has fewer tokens than the {} ranks", l->name(), degree);
    }
    if (!l->tied_layer().empty() && l.get() != &last)
      return fmt::format("layer '{}' uses the table of '{}' but is not the model's last layer", l->name(), l->tied_layer());
  }
  if (!any_embedding) return "the model has no embedding layer";
  if (last.type() != "dense" || !last.can_split(TensorSplit::column))
    return fmt::format("its last layer '{}' is not a dense layer", last.name());
  if (last.requested_split() && *last.requested_split() != TensorSplit::column)
    return fmt::format("its last layer '{}' asks for tensor_parallel = \"{}\"", last.name(),
                       *last.requested_split() == TensorSplit::row ? "row" : "replicated");
  if (last.settings().value("units", int64_t{0}) < degree)
    return fmt::format("its last layer '{}' has fewer units than the {} ranks", last.name(), degree);
  if (plan_splits(layers, inputs, degree, "").back().split == TensorSplit::row)
    return fmt::format("its last layer '{}' is the row half of a column/row pair", last.name());
  return "";
}

TensorPlan plan_tensor_parallel(const Layers& layers, const std::vector<std::vector<int>>& inputs, int degree, bool sequence,
                                VocabularySplit vocabulary, const std::string& file) {
  TensorPlan plan{plan_splits(layers, inputs, degree, file), false};
  if (degree > 1 && vocabulary != VocabularySplit::off) {
    const std::string why_not = vocabulary_obstacle(layers, inputs, degree);
    DT_USER_CHECK(why_not.empty() || vocabulary == VocabularySplit::where_possible,
                  "{}: strategy.vocab_parallel = true, but {}", file, why_not);
    plan.vocabulary = why_not.empty();
    if (plan.vocabulary) plan_vocabulary(layers, plan.layers);
  }
  if (sequence && degree > 1) plan_sequence(layers, inputs, plan);
  return plan;
}

bool reads_sequence_shard(const TensorPlace& place) {
  return place.sequence && (enters_split(place.split) || place.split == TensorSplit::none);
}

}  // namespace distrain
