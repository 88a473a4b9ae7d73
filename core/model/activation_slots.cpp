#include "core/model/activation_slots.hpp"

#include <algorithm>
#include <numeric>

#include "core/model/slot_planner.hpp"

namespace distrain {

int64_t ActivationSlots::total_elements() const { return std::accumulate(elements.begin(), elements.end(), int64_t{0}); }

namespace {

// A copy lives from the first step that writes or reads it to the last that does.
SlotPlanner plan_pass(const std::vector<int64_t>& elements, const std::vector<PassStep>& steps) {
  std::vector<size_t> last_use(elements.size(), 0);
  for (size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].writes >= 0) last_use[static_cast<size_t>(steps[s].writes)] = s;
    for (const int r : steps[s].reads) last_use[static_cast<size_t>(r)] = s;
  }
  SlotPlanner planner(elements.size());
  std::vector<size_t> ending;
  for (size_t s = 0; s < steps.size(); ++s) {
    ending.clear();
    std::vector<int> used = steps[s].reads;
    if (steps[s].writes >= 0) used.push_back(steps[s].writes);
    for (const int v : used) {
      const auto u = static_cast<size_t>(v);
      if (!planner.has(u)) planner.take(u, elements[u]);
      if (last_use[u] == s && std::find(ending.begin(), ending.end(), u) == ending.end()) ending.push_back(u);
    }
    for (const size_t u : ending) planner.give_back(u);  // after the step: its reads and write coexist
  }
  return planner;
}

// The passes share the buffers: each pass's slots, largest first, take buffers 0, 1, ...
// so that the buffers are as small as the two plans allow.
std::vector<int> largest_first(const SlotPlanner& pass, std::vector<int64_t>& elements) {
  std::vector<int> order(pass.sizes().size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pass.sizes()[a] > pass.sizes()[b]; });
  std::vector<int> buffer_of(order.size());
  for (size_t k = 0; k < order.size(); ++k) buffer_of[static_cast<size_t>(order[k])] = static_cast<int>(k);
  if (elements.size() < order.size()) elements.resize(order.size(), 0);
  for (size_t s = 0; s < order.size(); ++s)
    elements[static_cast<size_t>(buffer_of[s])] = std::max(elements[static_cast<size_t>(buffer_of[s])], pass.sizes()[s]);
  std::vector<int> slots = pass.slots();
  for (int& s : slots)
    if (s >= 0) s = buffer_of[static_cast<size_t>(s)];
  return slots;
}

}  // namespace

ActivationSlots plan_activation_slots(const std::vector<int64_t>& elements, const std::vector<PassStep>& forward,
                                      const std::vector<PassStep>& backward) {
  ActivationSlots plan;
  plan.forward = largest_first(plan_pass(elements, forward), plan.elements);
  plan.backward = largest_first(plan_pass(elements, backward), plan.elements);
  return plan;
}

}  // namespace distrain
