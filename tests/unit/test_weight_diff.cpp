// weight_diff (distrain compare): NaN and infinity always differ.
#include <limits>

#include "core/io/weight_diff.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

TEST_CASE("weight diff: close values pass, NaN or infinity on either side differs") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const WeightDiff same = weight_diff({1.0f, -2.0f}, {1.0f, -2.0f + 2e-6f});
  CHECK(same.scale == 2.0);
  CHECK(same.relative < 1e-5);
  for (const auto& [a, b] : std::vector<std::pair<std::vector<float>, std::vector<float>>>{
           {{1.0f, nan}, {1.0f, 2.0f}}, {{1.0f, 2.0f}, {1.0f, nan}}, {{1.0f, nan}, {1.0f, nan}}, {{1.0f, inf}, {1.0f, inf}}}) {
    const WeightDiff d = weight_diff(a, b);
    CHECK(std::isinf(d.max_abs));
    CHECK_FALSE(d.relative <= 1e-5);
  }
}

}  // namespace
}  // namespace distrain::test
