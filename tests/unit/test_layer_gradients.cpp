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

// input_gradient false: the layer is asked for parameter gradients only (a first layer),
// and only those are checked.
void gradient_check(const std::string& layer_toml, const Shape& in, int64_t batch, bool training = true,
                    bool input_gradient = true) {
  INFO("layer: " << layer_toml << " input " << in.str() << " batch " << batch
                 << (input_gradient ? "" : ", no input gradient"));
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
  layer->backward(ctx, x.view(), y.view(), dy.view(), input_gradient ? dx.view() : Tensor{});
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
  for (int64_t i = 0; input_gradient && i < x.view().numel(); ++i)
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

// Filters in multiples of 16 and at most 32 taps take the CPU's few-tap kernel gradient
// (on AVX-512); without an input gradient, the op applies the fused ReLU's mask itself.
TEST_CASE("conv2d gradients with few taps and 16 or 32 filters") {
  gradient_check("type='conv2d'\nfilters=16\nkernel_size=3\nactivation='relu'", Shape{5, 6, 1}, 5);
  gradient_check("type='conv2d'\nfilters=16\nkernel_size=3\nactivation='relu'", Shape{5, 6, 1}, 5, true, false);
  gradient_check("type='conv2d'\nfilters=3\nkernel_size=3\nactivation='relu'", Shape{5, 6, 2}, 2, true, false);
  gradient_check("type='conv2d'\nfilters=32\nkernel_size=3\npadding='same'\nstrides=2", Shape{5, 4, 3}, 3);
}

namespace {

// dw (kh, kw, Cin, Cout) and db (Cout), summed directly in double; `size` gets the sum of
// each one's terms' magnitudes, the scale of float rounding in any order of summation.
void direct_filter_grad(const Conv2DSpec& s, int64_t n, const std::vector<float>& x, const std::vector<float>& dy,
                        std::vector<double>& dw, std::vector<double>& db, std::vector<double>& size) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oh = 0; oh < s.out_h; ++oh)
      for (int64_t ow = 0; ow < s.out_w; ++ow)
        for (int64_t k = 0; k < s.out_c; ++k) {
          const double g = dy[static_cast<size_t>(((b * s.out_h + oh) * s.out_w + ow) * s.out_c + k)];
          db[static_cast<size_t>(k)] += g;
          size[dw.size() + static_cast<size_t>(k)] += std::abs(g);
          for (int64_t r = 0; r < s.kernel_h; ++r)
            for (int64_t q = 0; q < s.kernel_w; ++q) {
              const int64_t ih = oh * s.stride_h - s.pad_top + r, iw = ow * s.stride_w - s.pad_left + q;
              if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
              for (int64_t c = 0; c < s.in_c; ++c) {
                const size_t i = static_cast<size_t>(((r * s.kernel_w + q) * s.in_c + c) * s.out_c + k);
                const double term = g * x[static_cast<size_t>(((b * s.in_h + ih) * s.in_w + iw) * s.in_c + c)];
                dw[i] += term;
                size[i] += std::abs(term);
              }
            }
        }
}

}  // namespace

// Few taps (at most 32) take the CPU's own kernel; the last case takes oneDNN's.
TEST_CASE("conv2d kernel gradient matches a direct sum, accumulating, with and without the ReLU mask") {
  // in h, w, c; out h, w, c; kernel h, w; strides; padding top, bottom, left, right; bias; relu
  const std::vector<std::pair<Conv2DSpec, int64_t>> cases{
      {{28, 28, 1, 26, 26, 32, 3, 3, 1, 1, 0, 0, 0, 0, true, true}, 6},   // the default CNN's first layer
      {{7, 6, 1, 7, 6, 16, 3, 3, 1, 1, 1, 1, 1, 1, true, false}, 5},      // "same", 5 images: a partial block
      {{9, 9, 3, 5, 5, 48, 3, 3, 2, 2, 1, 1, 1, 1, false, false}, 3},     // 28 taps: two groups
      {{10, 11, 2, 4, 4, 16, 4, 4, 2, 2, 0, 0, 0, 0, true, false}, 2},    // 32 taps, the most
      {{6, 6, 1, 6, 3, 16, 5, 1, 1, 2, 2, 2, 0, 0, true, false}, 1},      // 5 x 1 kernel, one image
      {{8, 8, 8, 6, 6, 16, 3, 3, 1, 1, 0, 0, 0, 0, true, true}, 3},       // 72 taps: oneDNN
  };
  for (const auto& [s, n] : cases)
    for (const bool masked : {false, true}) {
      INFO("input " << s.in_h << "x" << s.in_w << "x" << s.in_c << ", " << s.out_c << " filters, batch " << n
                    << (masked ? ", through the ReLU" : ""));
      Backend& be = cpu();
      auto op = be.make_conv2d(s);
      Buffer x(be, Shape{n, s.in_h, s.in_w, s.in_c}), dy(be, Shape{n, s.out_h, s.out_w, s.out_c}), y(be, dy.view().shape);
      Buffer dw(be, Shape{s.kernel_h, s.kernel_w, s.in_c, s.out_c}), db(be, Shape{s.out_c});
      const auto xs = random_vector(static_cast<size_t>(x.view().numel()), 21);
      auto gs = random_vector(static_cast<size_t>(dy.view().numel()), 22);
      const auto ys = random_vector(gs.size(), 23);  // about half of it <= 0
      from_host(xs, x.view());
      from_host(gs, dy.view());
      from_host(ys, y.view());
      be.fill(dw.view(), 1.0f);  // the op adds to what is there
      be.fill(db.view(), 1.0f);
      op->backward_weights(x.view(), dy.view(), masked ? y.view() : Tensor{}, dw.view(), s.bias ? db.view() : Tensor{});
      if (masked)
        for (size_t i = 0; i < gs.size(); ++i) gs[i] = ys[i] > 0.0f ? gs[i] : 0.0f;
      std::vector<double> want_w(static_cast<size_t>(dw.view().numel()), 1.0), want_b(static_cast<size_t>(s.out_c), 1.0);
      std::vector<double> size(want_w.size() + want_b.size(), 1.0);
      direct_filter_grad(s, n, xs, gs, want_w, want_b, size);
      if (!s.bias) std::fill(want_b.begin(), want_b.end(), 1.0);
      const auto got_w = to_host(dw.view()), got_b = to_host(db.view());
      double worst = 0.0;  // error over the terms' magnitude; one term left out would be ~1e-3 or more
      for (size_t i = 0; i < got_w.size(); ++i) worst = std::max(worst, std::abs(got_w[i] - want_w[i]) / size[i]);
      for (size_t i = 0; i < got_b.size(); ++i)
        worst = std::max(worst, std::abs(got_b[i] - want_b[i]) / size[got_w.size() + i]);
      CHECK(worst < 1e-5);
    }
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

namespace distrain::test {

// Transformer layers on (sequence, features) inputs; attention with dropout redraws the same
// mask from the step seed in every forward, so finite differences see one function.
TEST_CASE("transformer layer gradients: layer_norm, gelu, position_embedding, dense on sequences, attention") {
  gradient_check("type='layer_norm'", Shape{3, 6}, 2);
  gradient_check("type='gelu'", Shape{4, 5}, 2);
  gradient_check("type='position_embedding'", Shape{4, 3}, 2);
  gradient_check("type='position_embedding'\nmax_length=6", Shape{4, 3}, 2);  // rows 4 and 5 unused
  gradient_check("type='dense'\nunits=5\nkernel_initializer='normal'", Shape{3, 4}, 2);
  gradient_check("type='attention'\nheads=2", Shape{5, 4}, 2);
  gradient_check("type='attention'\nheads=1", Shape{3, 3}, 1);
  gradient_check("type='attention'\nheads=2\ndropout=0.3", Shape{6, 4}, 2);
}

TEST_CASE("Llama layer gradients: rms_norm, silu, gated_mlp, grouped-query and rotary attention, without biases") {
  gradient_check("type='rms_norm'", Shape{3, 6}, 2);
  gradient_check("type='silu'", Shape{4, 5}, 2);
  gradient_check("type='gated_mlp'\nunits=6", Shape{3, 4}, 2);
  gradient_check("type='gated_mlp'\nunits=5\nactivation='gelu'\nuse_bias=true", Shape{3, 4}, 2);
  gradient_check("type='attention'\nheads=4\nkv_heads=2\nuse_bias=false", Shape{5, 8}, 2);
  gradient_check("type='attention'\nheads=4\nkv_heads=1\nrotary=true\nuse_bias=false", Shape{5, 8}, 2);
  gradient_check("type='attention'\nheads=2\nrotary=true\nrope_theta=100.0\nuse_bias=false\nqkv_bias=true",
                 Shape{6, 4}, 2);
  gradient_check("type='attention'\nheads=2\nkv_heads=1\nrotary=true\ndropout=0.3\n"
                 "rope_scaling={factor=4.0, original_max_position_embeddings=4}",
                 Shape{6, 8}, 2);
}

}  // namespace distrain::test

namespace distrain::test {

// Under train.precision = "bf16" attention keeps qkv and the heads' output at 2 bytes an
// element for its backward (unpacked to float32 copies while it runs). Its gradients are
// float32's to bf16's precision (operands and kept values rounded to 8 bits of mantissa),
// which a backward reading a wrong or stale copy would not be.
TEST_CASE("attention in bf16: qkv and the heads' output kept at 2 bytes, gradients those of float32 to bf16 precision") {
  Backend& be = cpu();
  const Shape in{8, 16};
  const int64_t batch = 3;
  struct Run {
    std::vector<float> y, dx, dparams;
    int64_t kept = 0;
  };
  auto run = [&](DType operands) {
    ParamArena arena;
    auto layer = make_layer("type='attention'\nheads=4");
    layer->set_matmul_dtype(operands);
    layer->set_workspace_dtype(operands);
    const Shape out = layer->setup(in, arena);
    const auto storage = allocate_arena(arena, be);
    from_host(random_vector(static_cast<size_t>(arena.values().numel()), 11, -0.5, 0.5), arena.values());
    be.fill(arena.grads(), 0.0f);
    Buffer x(be, in.batched(batch)), y(be, out.batched(batch)), dy(be, out.batched(batch)), dx(be, in.batched(batch));
    from_host(random_vector(static_cast<size_t>(x.view().numel()), 3), x.view());
    from_host(random_vector(static_cast<size_t>(dy.view().numel()), 5), dy.view());
    Ctx ctx{be, true, 1234};
    layer->forward(ctx, x.view(), y.view());
    layer->backward(ctx, x.view(), y.view(), dy.view(), dx.view());
    return Run{to_host(y.view()), to_host(dx.view()), to_host(arena.grads()), layer->workspace_bytes(batch)};
  };
  const Run f32 = run(DType::f32), bf16 = run(DType::bf16);
  // qkv and the heads' output: 4 x 16 values per token; the log-sum-exp (4 heads) stays float32.
  CHECK(f32.kept == batch * 8 * (4 * 16 * 4 + 4 * 4));
  CHECK(bf16.kept == batch * 8 * (4 * 16 * 2 + 4 * 4));
  auto near = [](const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
    double largest = 0.0, diff = 0.0;
    for (size_t i = 0; i < a.size(); ++i) {
      largest = std::max(largest, static_cast<double>(std::abs(a[i])));
      diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    }
    INFO(what << ": bf16 off float32 by " << diff / largest << " of the largest");
    CHECK(largest > 0.0);
    CHECK(diff > 0.0);              // the products were rounded
    CHECK(diff <= 3e-2 * largest);  // a few roundings of 2^-9 each, not a wrong value
  };
  near(f32.y, bf16.y, "output");
  near(f32.dx, bf16.dx, "input gradient");
  near(f32.dparams, bf16.dparams, "parameter gradients");
}

}  // namespace distrain::test
