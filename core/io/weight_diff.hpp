// How far apart two copies of one variable are, for `distrain compare`: the largest
// absolute difference and the largest magnitude of the first. A NaN or an infinity on
// either side is a difference (infinite), never dropped: NaN compares false with
// everything, so a plain std::max would skip it and call a diverged run "same".
#pragma once
#include <vector>

namespace distrain {

struct WeightDiff {
  double max_abs = 0;   // max |a - b|; infinite where either holds NaN or infinity
  double scale = 0;     // max |a| over a's finite values
  double relative = 0;  // max_abs / scale (max_abs when scale is 0)
};

WeightDiff weight_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace distrain
