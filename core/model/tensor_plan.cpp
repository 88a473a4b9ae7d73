#include "core/model/tensor_plan.hpp"

#include "core/base/error.hpp"

namespace distrain {

namespace {

using Layers = std::vector<std::unique_ptr<Layer>>;

// The layer list as a graph: whether layer j takes just layer j-1's output, which no other
// layer reads (a slice can run on through it).
class Chain {
 public:
  explicit Chain(const std::vector<std::vector<int>>& inputs) : inputs_(inputs), readers_(inputs.size(), 0) {
    for (const auto& in : inputs)
      for (const int j : in)
        if (j >= 0) ++readers_[static_cast<size_t>(j)];
  }
  bool linked(size_t j) const {
    return j > 0 && inputs_[j] == std::vector<int>{static_cast<int>(j) - 1} && readers_[j - 1] == 1;
  }

 private:
  const std::vector<std::vector<int>>& inputs_;
  std::vector<int> readers_;
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

std::vector<TensorPlanEntry> plan_tensor_parallel(const Layers& layers, const std::vector<std::vector<int>>& inputs,
                                                  int degree, const std::string& file) {
  std::vector<TensorPlanEntry> plan(layers.size());
  if (degree <= 1) return plan;
  const Chain chain(inputs);
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = *layers[i];
    const std::optional<TensorSplit> asked = l.requested_split();
    if (asked == TensorSplit::none) continue;
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

}  // namespace distrain
