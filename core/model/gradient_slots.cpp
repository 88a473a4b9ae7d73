#include "core/model/gradient_slots.hpp"

#include <numeric>

#include "core/base/error.hpp"
#include "core/model/slot_planner.hpp"

namespace distrain {

int64_t GradientSlots::total_elements() const { return std::accumulate(elements.begin(), elements.end(), int64_t{0}); }

GradientSlots plan_gradient_slots(const std::vector<int64_t>& elements, const std::vector<std::vector<int>>& inputs,
                                  size_t last) {
  const size_t layers = elements.size();
  DT_CHECK(inputs.size() == layers && layers > 0, "a gradient plan for {} layers with {} input lists", layers, inputs.size());
  SlotPlanner planner(layers);
  planner.take(layers - 1, elements.back());
  for (size_t t = layers; t-- > last;) {
    // Layer t's backward reads its output's gradient and writes its inputs' (the first
    // reader in backward order; the others add theirs to it).
    DT_CHECK(planner.has(t), "layer {}'s output is read by no later layer", t);
    for (const int j : inputs[t]) {
      const auto u = static_cast<size_t>(j);
      if (j >= 0 && u >= last && !planner.has(u)) planner.take(u, elements[u]);
    }
    planner.give_back(t);
  }
  return GradientSlots{planner.slots(), planner.sizes()};
}

}  // namespace distrain
