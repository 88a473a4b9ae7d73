// Forward results against values computed by hand.
#include <limits>

#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

struct Run {
  ParamArena arena;
  std::unique_ptr<ArenaStorage> storage;
  std::unique_ptr<Layer> layer;
  Shape out;
  std::vector<float> forward(const Shape& in, const std::vector<float>& x, int64_t batch = 1, bool training = true) {
    Backend& be = cpu();
    Buffer bx(be, in.batched(batch)), by(be, out.batched(batch));
    from_host(x, bx.view());
    Ctx ctx{be, training, 1};
    layer->forward(ctx, bx.view(), by.view());
    return to_host(by.view());
  }
};

std::unique_ptr<Run> build(const std::string& toml_text, const Shape& in) {
  auto r = std::make_unique<Run>();
  r->layer = make_layer(toml_text);
  r->out = r->layer->setup(in, r->arena);
  r->storage = allocate_arena(r->arena, cpu());
  r->arena.initialize(1);
  return r;
}

std::vector<float> iota(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  return v;
}

}  // namespace

TEST_CASE("conv2d 3x3, same padding, stride 2: TensorFlow's asymmetric padding") {
  // 4x4 input 1..16, all-ones kernel. TF pads 0 before and 1 after on each axis.
  auto r = build("type='conv2d'\nfilters=1\nkernel_size=3\nstrides=2\npadding='same'\nuse_bias=false", Shape{4, 4, 1});
  CHECK(r->out == Shape{2, 2, 1});
  cpu().fill(r->arena.values(), 1.0f);
  const auto y = r->forward(Shape{4, 4, 1}, iota(16));
  CHECK(y == std::vector<float>{54, 45, 72, 54});
}

TEST_CASE("conv2d valid padding with bias and relu, kernel in (kh, kw, in, out) layout") {
  // 2x2 input with 2 channels, 1x1 kernel mapping (c0, c1) -> (c0 - c1, c1 - c0) + bias.
  auto r = build("type='conv2d'\nfilters=2\nkernel_size=1\nactivation='relu'", Shape{2, 2, 2});
  REQUIRE(r->arena.find("layer", "kernel") == 0);
  CHECK(r->arena.value(0).shape == Shape{1, 1, 2, 2});
  from_host({1, -1, -1, 1}, r->arena.value(0));  // kernel[0][0][in][out]
  from_host({0.5f, 0.0f}, r->arena.value(1));
  const auto y = r->forward(Shape{2, 2, 2}, {3, 1, 1, 3, 2, 2, 0, 5});
  CHECK(y == std::vector<float>{2.5f, 0, 0, 2, 0.5f, 0, 0, 5});
}

TEST_CASE("max and average pooling with same padding never count padded cells") {
  auto mp = build("type='max_pool2d'\npool_size=2\npadding='same'", Shape{3, 3, 1});
  CHECK(mp->out == Shape{2, 2, 1});
  CHECK(mp->forward(Shape{3, 3, 1}, iota(9)) == std::vector<float>{5, 6, 8, 9});
  auto ap = build("type='avg_pool2d'\npool_size=2\npadding='same'", Shape{3, 3, 1});
  CHECK(ap->forward(Shape{3, 3, 1}, iota(9)) == std::vector<float>{3, 4.5f, 7.5f, 9});
  auto g = build("type='global_avg_pool2d'", Shape{2, 2, 2});
  CHECK(g->out == Shape{2});
  CHECK(g->forward(Shape{2, 2, 2}, iota(8)) == std::vector<float>{4, 5});
}

TEST_CASE("flatten keeps NHWC order: H, then W, then C") {
  auto r = build("type='flatten'", Shape{2, 2, 3});
  CHECK(r->out == Shape{12});
  // x[h][w][c] = 100h + 10w + c
  std::vector<float> x;
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 2; ++w)
      for (int c = 0; c < 3; ++c) x.push_back(static_cast<float>(100 * h + 10 * w + c));
  CHECK(r->forward(Shape{2, 2, 3}, x) == x);
}

TEST_CASE("dense computes x W + b with W stored (in, units)") {
  auto r = build("type='dense'\nunits=2", Shape{3});
  CHECK(r->arena.value(0).shape == Shape{3, 2});
  from_host({1, 0, 0, 1, 1, 1}, r->arena.value(0));
  from_host({0.5f, -0.5f}, r->arena.value(1));
  CHECK(r->forward(Shape{3}, {1, 2, 3, 4, 5, 6}, 2) == std::vector<float>{4.5f, 4.5f, 10.5f, 10.5f});
}

TEST_CASE("batch_norm: batch statistics in training, moving statistics in inference") {
  auto r = build("type='batch_norm'\nmomentum=0.5\nepsilon=0.0001", Shape{1});
  const auto y = r->forward(Shape{1}, {1, 3}, 2);  // mean 2, variance 1 (biased)
  CHECK(y[0] == doctest::Approx(-1.0).epsilon(1e-3));
  CHECK(y[1] == doctest::Approx(1.0).epsilon(1e-3));
  // moving = 0.5 * initial (0, 1) + 0.5 * batch (2, 1)
  CHECK(to_host(r->arena.value(r->arena.find("layer", "moving_mean")))[0] == doctest::Approx(1.0));
  const auto inf = r->forward(Shape{1}, {1, 3}, 2, /*training=*/false);
  CHECK(inf[0] == doctest::Approx(0.0).epsilon(1e-3));
  CHECK(inf[1] == doctest::Approx(2.0).epsilon(1e-3));
}

TEST_CASE("rescaling and dropout: Keras semantics") {
  auto rs = build("type='rescaling'\nscale=0.5\noffset=1", Shape{2});
  CHECK(rs->forward(Shape{2}, {2, 4}) == std::vector<float>{2, 3});
  auto d = build("type='dropout'\nrate=0.5", Shape{1000});
  const auto y = d->forward(Shape{1000}, std::vector<float>(1000, 1.0f));
  int kept = 0;
  for (float v : y) {
    CHECK((v == 0.0f || v == 2.0f));  // inverted scaling 1 / (1 - rate)
    kept += v != 0.0f;
  }
  CHECK(kept > 430);
  CHECK(kept < 570);
  CHECK(d->forward(Shape{1000}, std::vector<float>(1000, 1.0f), 1, /*training=*/false) == std::vector<float>(1000, 1.0f));
}

}  // namespace distrain::test

namespace distrain::test {

TEST_CASE("all_finite: NaN and either infinity anywhere are caught, the largest, smallest and subnormal floats are finite") {
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> v(1000, 1.0f);
  v[3] = big;
  v[4] = -big;
  v[5] = tiny;
  v[6] = -0.0f;
  Buffer b(cpu(), Shape{1000});
  from_host(v, b.view());
  CHECK(all_finite(cpu(), b.view()));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (size_t at : {size_t{0}, size_t{517}, size_t{999}}) {
      std::vector<float> w = v;
      w[at] = bad;
      from_host(w, b.view());
      CHECK_FALSE(all_finite(cpu(), b.view()));
    }
  }
}

}  // namespace distrain::test
