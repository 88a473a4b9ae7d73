#include "core/model/slot_planner.hpp"

#include <algorithm>

#include "core/base/error.hpp"

namespace distrain {

void SlotPlanner::take(size_t value, int64_t elements) {
  DT_CHECK(slot_.at(value) < 0, "value {} takes a second slot", value);
  int chosen = pick_free(elements);
  if (chosen < 0) {
    chosen = static_cast<int>(sizes_.size());
    sizes_.push_back(0);
  } else {
    free_.erase(std::find(free_.begin(), free_.end(), chosen));
  }
  int64_t& size = sizes_[static_cast<size_t>(chosen)];
  size = std::max(size, elements);
  slot_[value] = chosen;
}

void SlotPlanner::give_back(size_t value) {
  DT_CHECK(slot_.at(value) >= 0, "value {} gives back a slot it never took", value);
  free_.push_back(slot_[value]);
}

int SlotPlanner::pick_free(int64_t elements) const {
  const auto size = [&](int s) { return sizes_[static_cast<size_t>(s)]; };
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

}  // namespace distrain
