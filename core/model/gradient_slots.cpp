#include "core/model/gradient_slots.hpp"

#include <algorithm>
#include <numeric>

#include "core/base/error.hpp"

namespace distrain {

int64_t GradientSlots::total_elements() const { return std::accumulate(elements.begin(), elements.end(), int64_t{0}); }

namespace {

class SlotPlanner {
 public:
  explicit SlotPlanner(size_t layers) { plan_.slot.assign(layers, -1); }

  void take(size_t layer, int64_t elements) {
    int chosen = pick_free(elements);
    if (chosen < 0) {
      chosen = static_cast<int>(plan_.elements.size());
      plan_.elements.push_back(0);
    } else {
      free_.erase(std::find(free_.begin(), free_.end(), chosen));
    }
    int64_t& size = plan_.elements[static_cast<size_t>(chosen)];
    size = std::max(size, elements);
    plan_.slot[layer] = chosen;
  }
  void give_back(size_t layer) { free_.push_back(plan_.slot[layer]); }
  bool has(size_t layer) const { return plan_.slot[layer] >= 0; }
  GradientSlots result() && { return std::move(plan_); }

 private:
  // The smallest free slot that holds `elements`, else the largest free one (to grow), else -1.
  int pick_free(int64_t elements) const {
    const auto better = [&](int s, int than) {
      const bool fits = size(s) >= elements, than_fits = size(than) >= elements;
      if (fits != than_fits) return fits;
      return fits ? size(s) < size(than) : size(s) > size(than);
    };
    int best = -1;
    for (const int s : free_)
      if (best < 0 || better(s, best)) best = s;
    return best;
  }
  int64_t size(int s) const { return plan_.elements[static_cast<size_t>(s)]; }

  GradientSlots plan_;
  std::vector<int> free_;
};

}  // namespace

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
  return std::move(planner).result();
}

}  // namespace distrain
