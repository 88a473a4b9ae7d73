#include "core/model/tensor_plan.hpp"

#include "core/base/error.hpp"

namespace distrain {

namespace {

// The layer after i that is not element-wise (layers.size() when none).
size_t next_non_elementwise(const std::vector<std::unique_ptr<Layer>>& layers, size_t i) {
  size_t j = i + 1;
  while (j < layers.size() && layers[j]->elementwise()) ++j;
  return j;
}

bool can_be_row(const Layer& l) {
  return l.can_split(TensorSplit::row) && l.requested_split().value_or(TensorSplit::row) == TensorSplit::row;
}

}  // namespace

std::vector<TensorPlanEntry> plan_tensor_parallel(const std::vector<std::unique_ptr<Layer>>& layers, int degree,
                                                  const std::string& file) {
  std::vector<TensorPlanEntry> plan(layers.size());
  if (degree <= 1) return plan;
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = *layers[i];
    const std::optional<TensorSplit> asked = l.requested_split();
    if (!l.can_split(TensorSplit::column) || asked == TensorSplit::none) continue;
    DT_USER_CHECK(asked != TensorSplit::row, "{}: layer '{}': tensor_parallel = \"row\" needs a column-parallel layer before "
                  "it (with only relu, dropout or rescaling between)", file, l.name());
    plan[i].split = TensorSplit::column;
    const size_t j = next_non_elementwise(layers, i);
    if (j < layers.size() && can_be_row(*layers[j])) {
      plan[j].split = TensorSplit::row;
      i = j;
    } else {
      plan[i].gather_after = true;
    }
  }
  return plan;
}

}  // namespace distrain
