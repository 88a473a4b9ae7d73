// SlotPlanner: a few buffers ("slots") that values with disjoint lifetimes take in turn.
// Values are named by index; each takes a slot when it starts to live and gives it back
// when it ends. A value takes the free slot that fits it best; where none fits, the largest
// free slot grows (so a slot's size is the largest value it ever holds).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace distrain {

class SlotPlanner {
 public:
  explicit SlotPlanner(size_t values) : slot_(values, -1) {}

  void take(size_t value, int64_t elements);
  void give_back(size_t value);
  bool has(size_t value) const { return slot_[value] >= 0; }
  // Per value: its slot, -1 for one never taken.
  const std::vector<int>& slots() const { return slot_; }
  // Per slot: its size in elements per example.
  const std::vector<int64_t>& sizes() const { return sizes_; }

 private:
  // The smallest free slot that holds `elements`, else the largest free one (to grow), else -1.
  int pick_free(int64_t elements) const;

  std::vector<int> slot_;
  std::vector<int64_t> sizes_;
  std::vector<int> free_;
};

}  // namespace distrain
