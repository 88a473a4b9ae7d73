#include "core/io/weight_diff.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/base/error.hpp"

namespace distrain {

WeightDiff weight_diff(const std::vector<float>& a, const std::vector<float>& b) {
  DT_CHECK(a.size() == b.size(), "weight_diff: {} values against {}", a.size(), b.size());
  WeightDiff d;
  for (size_t k = 0; k < a.size(); ++k) {
    const double x = a[k], y = b[k];
    const bool finite = std::isfinite(x) && std::isfinite(y);
    d.max_abs = std::max(d.max_abs, finite ? std::abs(x - y) : std::numeric_limits<double>::infinity());
    if (std::isfinite(x)) d.scale = std::max(d.scale, std::abs(x));
  }
  d.relative = d.scale > 0 ? d.max_abs / d.scale : d.max_abs;
  return d;
}

}  // namespace distrain
