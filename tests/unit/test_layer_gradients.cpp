// Finite-difference checks of every layer's backward: input gradients and parameter
// gradients, for several shapes, both paddings and strides.
#include <cmath>

#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

// Loss L = sum(y * r) for a fixed random r, so dL/dy = r.
double weighted_sum(const Tensor& y, const std::vector<float>& r) {
  const float* p = y.f32();
  double s = 0.0;
  for (size_t i = 0; i < r.size(); ++i) s += static_cast<double>(p[i]) * r[i];
  return s;
}

bool close(double analytic, double numeric) {
  return std::abs(analytic - numeric) <= 3e-3 + 2e-2 * std::max(std::abs(analytic), std::abs(numeric));
}

void gradient_check(const std::string& layer_toml, const Shape& in, int64_t batch, bool training = true) {
  INFO("layer: " << layer_toml << " input " << in.str() << " batch " << batch);
  Backend& be = cpu();
  ParamArena arena;
  auto layer = make_layer(layer_toml);
  const Shape out = layer->setup(in, arena);
  const auto storage = allocate_arena(arena, be);
  arena.initialize(7);
  // Random trainable values (not the initializer's ones/zeros) so every path is exercised.
  if (arena.values().numel()) from_host(random_vector(static_cast<size_t>(arena.values().numel()), 11, -0.8, 0.8), arena.values());

  Buffer x(be, in.batched(batch)), y(be, out.batched(batch)), dy(be, out.batched(batch)), dx(be, in.batched(batch));
  // Distinct inputs at least 0.03 apart and 0.015 from zero: a nudge of eps never swaps a
  // max-pool winner nor crosses a ReLU kink, so finite differences stay valid.
  std::vector<float> xs(static_cast<size_t>(x.view().numel()));
  Rng order(3);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = (static_cast<float>(i) - static_cast<float>(xs.size()) / 2) * 0.03f + 0.015f;
  for (size_t i = xs.size(); i > 1; --i) std::swap(xs[i - 1], xs[order.below(i)]);
  from_host(xs, x.view());
  const std::vector<float> r = random_vector(static_cast<size_t>(y.view().numel()), 5);
  Ctx ctx{be, training, 1234};

  layer->forward(ctx, x.view(), y.view());
  from_host(r, dy.view());
  be.fill(arena.grads(), 0.0f);
  layer->backward(ctx, x.view(), y.view(), dy.view(), dx.view());
  const std::vector<float> dx_analytic = to_host(dx.view());
  const std::vector<float> dparams = to_host(arena.grads());

  auto loss_after_nudge = [&](float* p, float delta) {
    const float saved = *p;
    *p = saved + delta;
    layer->forward(ctx, x.view(), y.view());
    *p = saved;
    return weighted_sum(y.view(), r);
  };
  // Central differences at eps and eps/2. Where they disagree, a nudge crossed a kink
  // (ReLU at 0, a max-pool tie) and the point is not differentiable: it is skipped, as
  // Caffe's checker does, and at most 5% of the points may be skipped.
  int checked = 0, skipped = 0;
  auto check = [&](float* p, double analytic, const std::string& what) {
    const float eps = 2e-3f;
    const double fd = (loss_after_nudge(p, eps) - loss_after_nudge(p, -eps)) / (2.0 * eps);
    const double fd_half = (loss_after_nudge(p, eps / 2) - loss_after_nudge(p, -eps / 2)) / eps;
    ++checked;
    if (!close(fd, fd_half)) {
      ++skipped;
      return;
    }
    INFO(what << ": analytic " << analytic << " vs finite difference " << fd);
    CHECK(close(analytic, fd));
  };
  float* px = x.view().f32();
  for (int64_t i = 0; i < x.view().numel(); ++i)
    check(px + i, dx_analytic[static_cast<size_t>(i)], "d input[" + std::to_string(i) + "]");
  for (const Variable& v : arena.variables()) {
    if (!v.trainable) continue;
    float* pv = arena.values().f32() + v.offset;
    for (int64_t i = 0; i < v.shape.numel(); ++i)
      check(pv + i, dparams[static_cast<size_t>(v.offset + i)], "d " + v.name + "[" + std::to_string(i) + "]");
  }
  CHECK(skipped * 20 <= checked);
}

}  // namespace

TEST_CASE("conv2d gradients: valid and same padding, strides, bias, fused relu") {
  gradient_check("type='conv2d'\nfilters=3\nkernel_size=3", Shape{5, 5, 2}, 2);
  gradient_check("type='conv2d'\nfilters=2\nkernel_size=3\npadding='same'\nstrides=2", Shape{6, 5, 2}, 2);
  gradient_check("type='conv2d'\nfilters=4\nkernel_size=[2,3]\npadding='same'\nuse_bias=false", Shape{4, 4, 3}, 1);
  gradient_check("type='conv2d'\nfilters=3\nkernel_size=3\npadding='same'\nactivation='relu'\nstrides=[1,2]", Shape{5, 6, 1}, 2);
}

TEST_CASE("dense gradients, with and without bias and relu") {
  gradient_check("type='dense'\nunits=4", Shape{6}, 3);
  gradient_check("type='dense'\nunits=3\nuse_bias=false\nactivation='relu'", Shape{5}, 4);
}

TEST_CASE("pooling gradients: max and average, valid and same") {
  gradient_check("type='max_pool2d'", Shape{4, 4, 2}, 2);
  gradient_check("type='max_pool2d'\npool_size=3\nstrides=2\npadding='same'", Shape{5, 5, 2}, 2);
  gradient_check("type='avg_pool2d'", Shape{4, 6, 3}, 2);
  gradient_check("type='avg_pool2d'\npool_size=[2,3]\nstrides=1\npadding='same'", Shape{3, 4, 2}, 2);
  gradient_check("type='global_avg_pool2d'", Shape{3, 4, 5}, 2);
}

TEST_CASE("batch_norm gradients in training mode, all center/scale combinations") {
  gradient_check("type='batch_norm'", Shape{3, 3, 4}, 3);
  gradient_check("type='batch_norm'\ncenter=true\nscale=false", Shape{2, 3, 2}, 3);
  gradient_check("type='batch_norm'\ncenter=false\nscale=true", Shape{5}, 6);
  gradient_check("type='batch_norm'", Shape{4}, 5, /*training=*/false);  // frozen: moving statistics
}

TEST_CASE("parameter-free layers: relu, rescaling, dropout, flatten") {
  gradient_check("type='relu'", Shape{3, 4, 2}, 2);
  gradient_check("type='rescaling'\nscale=0.5\noffset=-1.0", Shape{3, 3, 1}, 2);
  gradient_check("type='dropout'\nrate=0.3", Shape{20}, 3);
  gradient_check("type='flatten'", Shape{2, 3, 4}, 2);
}

}  // namespace distrain::test
