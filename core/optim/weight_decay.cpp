#include "core/optim/weight_decay.hpp"

namespace distrain {

bool decays(const Variable& v) { return v.trainable && v.name.ends_with("kernel"); }

std::vector<Range> decayed_ranges(const ParamArena& arena) {
  std::vector<Range> ranges;
  for (const Variable& v : arena.variables()) {
    if (!decays(v)) continue;
    const int64_t end = v.offset + v.shape.numel();
    ranges.push_back({v.offset, (end + ParamArena::kAlign - 1) / ParamArena::kAlign * ParamArena::kAlign});  // with its padding
  }
  return merged(std::move(ranges));
}

std::vector<Range> within(const std::vector<Range>& ranges, Range window) {
  std::vector<Range> out;
  for (const Range& r : ranges) {
    const Range part = intersect(r, window);
    if (!part.empty()) out.push_back({part.begin - window.begin, part.end - window.begin});
  }
  return out;
}

}  // namespace distrain
