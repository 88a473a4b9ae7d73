#include "core/model/tensor_plan.hpp"

#include "core/base/error.hpp"

namespace distrain {

namespace {

using Layers = std::vector<std::unique_ptr<Layer>>;

// The layer after i that does not work per channel (layers.size() when none).
size_t next_not_per_channel(const Layers& layers, size_t i) {
  size_t j = i + 1;
  while (j < layers.size() && layers[j]->per_channel()) ++j;
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

std::vector<TensorPlanEntry> plan_tensor_parallel(const Layers& layers, int degree, const std::string& file) {
  std::vector<TensorPlanEntry> plan(layers.size());
  if (degree <= 1) return plan;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = *layers[i];
    const std::optional<TensorSplit> asked = l.requested_split();
    if (!l.can_split(TensorSplit::column) || asked == TensorSplit::none) continue;
    DT_USER_CHECK(asked != TensorSplit::row, "{}: layer '{}': tensor_parallel = \"row\" needs a column-parallel layer before "
                  "it (with only relu, dropout, rescaling, pooling or batch_norm between)", file, l.name());
    plan[i].split = TensorSplit::column;
    const size_t j = next_not_per_channel(layers, i);
    if (j < layers.size() && can_be_row(*layers[j])) {
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
