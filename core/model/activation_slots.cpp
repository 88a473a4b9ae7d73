#include "core/model/activation_slots.hpp"

#include <algorithm>
#include <numeric>

namespace distrain {

int64_t ActivationSlots::total_elements() const { return std::accumulate(elements.begin(), elements.end(), int64_t{0}); }

namespace {

// One pass's assignment: per value its slot (-1: none), per slot its size.
struct PassPlan {
  std::vector<int> slots;
  std::vector<int64_t> sizes;
};

// A copy lives from the first step that writes or reads it to the last that does (a
// step's reads and write coexist). Copies take slots largest first, each the first slot
// free over its whole life: a slot's size is its first copy's, never grown by a later one.
// (Taking slots in step order instead let a small copy hold the slot a larger one needed
// later, which then grew another: 3 large slots where 2 large and a small one do.)
PassPlan plan_pass(const std::vector<int64_t>& elements, const std::vector<PassStep>& steps) {
  constexpr size_t kNever = static_cast<size_t>(-1);
  std::vector<size_t> first(elements.size(), kNever), last(elements.size(), 0);
  for (size_t s = 0; s < steps.size(); ++s) {
    std::vector<int> used = steps[s].reads;
    if (steps[s].writes >= 0) used.push_back(steps[s].writes);
    for (const int v : used) {
      const auto u = static_cast<size_t>(v);
      if (first[u] == kNever) first[u] = s;
      last[u] = s;
    }
  }
  std::vector<size_t> order;
  for (size_t u = 0; u < elements.size(); ++u)
    if (first[u] != kNever) order.push_back(u);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return elements[a] > elements[b]; });
  PassPlan plan{std::vector<int>(elements.size(), -1), {}};
  std::vector<std::vector<size_t>> holders;  // per slot: the values it holds
  const auto overlap = [&](size_t a, size_t b) { return first[a] <= last[b] && first[b] <= last[a]; };
  for (const size_t u : order) {
    size_t slot = 0;
    while (slot < holders.size() &&
           std::any_of(holders[slot].begin(), holders[slot].end(), [&](size_t v) { return overlap(u, v); }))
      ++slot;
    if (slot == holders.size()) {
      holders.emplace_back();
      plan.sizes.push_back(elements[u]);
    }
    holders[slot].push_back(u);
    plan.slots[u] = static_cast<int>(slot);
  }
  return plan;
}

// The passes share the buffers: each pass's slots, largest first, take buffers 0, 1, ...
// so that the buffers are as small as the two plans allow.
std::vector<int> largest_first(const PassPlan& pass, std::vector<int64_t>& elements) {
  std::vector<int> order(pass.sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pass.sizes[a] > pass.sizes[b]; });
  std::vector<int> buffer_of(order.size());
  for (size_t k = 0; k < order.size(); ++k) buffer_of[static_cast<size_t>(order[k])] = static_cast<int>(k);
  if (elements.size() < order.size()) elements.resize(order.size(), 0);
  for (size_t s = 0; s < order.size(); ++s)
    elements[static_cast<size_t>(buffer_of[s])] = std::max(elements[static_cast<size_t>(buffer_of[s])], pass.sizes[s]);
  std::vector<int> slots = pass.slots;
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
