// Losses: values by hand, gradients by finite differences, accuracy counts.
#include <cmath>

#include "core/model/loss.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {

namespace {
struct LossRun {
  Buffer out, labels, grad;
  LossRun(const std::vector<float>& o, int64_t k, const std::vector<int32_t>& y) {
    const auto n = static_cast<int64_t>(y.size());
    out = Buffer(cpu(), Shape{n, k});
    labels = Buffer(cpu(), Shape{n}, DType::i32);
    grad = Buffer(cpu(), Shape{n, k});
    from_host(o, out.view());
    cpu().upload(y.data(), labels.view());
  }
};
}  // namespace

TEST_CASE("sparse categorical cross-entropy from logits: value, gradient scaled by 1/global batch, accuracy") {
  LossRun r({1, 2, 3, 5, 1, 1}, 3, {2, 1});
  Loss loss(LossSpec{}, cpu());
  const LossStats s = loss.compute(r.out.view(), r.labels.view(), 0.25f, r.grad.view());
  const double l0 = std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3;
  const double l1 = std::log(std::exp(5) + 2 * std::exp(1)) - 1;
  CHECK(s.loss_sum == doctest::Approx(l0 + l1));
  CHECK(s.correct == 1);
  CHECK(s.count == 2);
  const auto g = to_host(r.grad.view());
  const double z = std::exp(1) + std::exp(2) + std::exp(3);
  CHECK(g[2] == doctest::Approx((std::exp(3) / z - 1) * 0.25));
  CHECK(g[0] == doctest::Approx(std::exp(1) / z * 0.25));
}

TEST_CASE("cross-entropy is stable for huge logits") {
  LossRun r({1000, -1000, 0}, 3, {1});
  Loss loss(LossSpec{}, cpu());
  const LossStats s = loss.compute(r.out.view(), r.labels.view(), 1.0f, r.grad.view());
  CHECK(s.loss_sum == doctest::Approx(2000.0));
  for (float g : to_host(r.grad.view())) CHECK(std::isfinite(g));
}

TEST_CASE("cross-entropy on probabilities (from_logits = false), gradient by finite differences") {
  const std::vector<float> p{0.2f, 0.3f, 0.5f};
  LossRun r(p, 3, {1});
  Loss loss(LossSpec{LossType::sparse_categorical_crossentropy, false}, cpu());
  CHECK(loss.compute(r.out.view(), r.labels.view(), 1.0f, r.grad.view()).loss_sum == doctest::Approx(-std::log(0.3)));
  const auto g = to_host(r.grad.view());
  for (int j = 0; j < 3; ++j) {
    auto at = [&](float d) {
      std::vector<float> q = p;
      q[static_cast<size_t>(j)] += d;
      LossRun rr(q, 3, {1});
      return loss.compute(rr.out.view(), rr.labels.view(), 1.0f, Tensor{}).loss_sum;
    };
    CHECK(g[static_cast<size_t>(j)] == doctest::Approx((at(1e-3f) - at(-1e-3f)) / 2e-3).epsilon(1e-2));
  }
}

TEST_CASE("mean squared error against one-hot labels") {
  LossRun r({0.5f, 0.5f, 0.9f, 0.1f}, 2, {0, 0});
  Loss loss(LossSpec{LossType::mean_squared_error, true}, cpu());
  const LossStats s = loss.compute(r.out.view(), r.labels.view(), 0.5f, r.grad.view());
  CHECK(s.loss_sum == doctest::Approx(0.25 + 0.01));
  CHECK(s.correct == 2);  // a tie (first row) goes to the lowest index, as argmax
  const auto g = to_host(r.grad.view());
  CHECK(g[0] == doctest::Approx(2 * -0.5 / 2 * 0.5));
  CHECK(g[3] == doctest::Approx(2 * 0.1 / 2 * 0.5));
}

}  // namespace distrain::test
