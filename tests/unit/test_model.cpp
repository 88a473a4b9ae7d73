// Model building: names, shape inference errors, the registry, seeded initialisation, arena layout.
#include <omp.h>

#include <algorithm>

#include "core/model/model.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

const char* kCnn = R"(
input_shape = [28, 28, 1]
[[layers]]
type = "rescaling"
scale = 0.00392156862745098
[[layers]]
type = "conv2d"
filters = 8
kernel_size = 3
activation = "relu"
[[layers]]
type = "max_pool2d"
[[layers]]
type = "conv2d"
filters = 4
kernel_size = 3
name = "second"
[[layers]]
type = "flatten"
[[layers]]
type = "dense"
units = 10
)";

std::unique_ptr<Model> model_from(const std::string& text) {
  const toml::table t = toml::parse(text);
  return std::make_unique<Model>(parse_model_spec(t, "test.toml"), cpu());
}

}  // namespace

TEST_CASE("model: default names, shapes, one contiguous aligned arena") {
  auto m = model_from(kCnn);
  CHECK(m->layers()[1]->name() == "conv2d_1");
  CHECK(m->layers()[3]->name() == "second");
  CHECK(m->layers()[5]->name() == "dense_1");
  CHECK(m->output_shape() == Shape{10});
  const auto& vars = m->params().variables();
  REQUIRE(vars.size() == 6);
  CHECK(vars[0].shape == Shape{3, 3, 1, 8});
  CHECK(vars[4].shape == Shape{11 * 11 * 4, 10});
  for (const Variable& v : vars) CHECK(v.offset % ParamArena::kAlign == 0);
  CHECK(m->params().trainable_elements() == 72 + 8 + 288 + 4 + 4840 + 10);
  CHECK(m->params().grads().numel() == m->params().values().numel());
}

TEST_CASE("model: same seed gives the same weights, another seed others") {
  auto a = model_from(kCnn), b = model_from(kCnn), c = model_from(kCnn);
  a->params().initialize(42);
  b->params().initialize(42);
  c->params().initialize(43);
  CHECK(to_host(a->params().values()) == to_host(b->params().values()));
  CHECK(to_host(a->params().values()) != to_host(c->params().values()));
  // glorot_uniform limit for the dense kernel: sqrt(6 / (484 + 10))
  const auto w = to_host(a->params().value(4));
  const float limit = std::sqrt(6.0f / 494.0f);
  for (float x : w) CHECK(std::abs(x) <= limit);
  const auto bias = to_host(a->params().value(5));
  CHECK(bias == std::vector<float>(10, 0.0f));
}

// Each element's draws start at its own counter of the variable's stream, so initialising
// on any number of threads gives the same values (variables above the parallel threshold).
TEST_CASE("model: initial values do not depend on the number of threads") {
  ParamArena arena;
  arena.declare("dense", "kernel", Shape{400, 300}, Init::normal, 400, 300, true);
  arena.declare("dense", "other", Shape{400, 300}, Init::glorot_uniform, 400, 300, true);
  const auto storage = allocate_arena(arena, cpu());
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  arena.initialize(7);
  const std::vector<float> one = to_host(arena.values());
  omp_set_num_threads(std::max(threads, 2));
  cpu().fill(arena.values(), 0.0f);
  arena.initialize(7);
  const std::vector<float> several = to_host(arena.values());
  omp_set_num_threads(threads);
  CHECK(one == several);
  CHECK(std::count(one.begin(), one.end(), 0.0f) < 10);  // every element drawn
}

TEST_CASE("model errors name the file, the layer and what to do") {
  CHECK_THROWS_WITH_AS(model_from("input_shape=[4,4,1]\n[[layers]]\ntype='conv3d'"),
                       doctest::Contains("unknown layer type 'conv3d' (known: add, attention, avg_pool2d, batch_norm, conv2d, dense"),
                       UserError);
  CHECK_THROWS_WITH_AS(model_from("input_shape=[4,4,1]\n[[layers]]\ntype='conv2d'\nfilters=2\nkernel_size=3\n[[layers]]\ntype='dense'\nunits=3"),
                       doctest::Contains("layer 'dense_1': expects (features,) or (sequence, features), got (2, 2, 2); add a flatten"),
                       UserError);
  CHECK_THROWS_WITH_AS(model_from("input_shape=[4,4,1]\n[[layers]]\ntype='conv2d'\nfilters=2\nkernel_size=5"),
                       doctest::Contains("layer 'conv2d_1': kernel 5x5 does not fit input (4, 4, 1)"), UserError);
  CHECK_THROWS_WITH_AS(model_from("input_shape=[4,4,1]\n[[layers]]\ntype='conv2d'\nfilters=2\nkernel_size=3\nfilter=2"),
                       doctest::Contains("test.toml:6: model.layers[0].filter: unknown key"), UserError);
  CHECK_THROWS_WITH_AS(model_from("input_shape=[4,4,1]\n[[layers]]\ntype='conv2d'\nfilters='8'\nkernel_size=3"),
                       doctest::Contains("test.toml:4: model.layers[0].filters: expected an integer"), UserError);
  CHECK_THROWS_WITH_AS(model_from("input_shape=[4,4,1]\n[[layers]]\ntype='conv2d'\nfilters=2\nkernel_size=3\npadding='full'"),
                       doctest::Contains("'full' is not one of \"valid\", \"same\""), UserError);
  CHECK_THROWS_WITH_AS(model_from("input_shape=[4,0]\n[[layers]]\ntype='flatten'"),
                       doctest::Contains("test.toml:1: model.input_shape: expected an array of positive integers"), UserError);
  CHECK_THROWS_WITH_AS(model_from("input_shape=[4]\n[[layers]]\ntype='dense'\nunits=2\nname='x'\n[[layers]]\ntype='dense'\nunits=2\nname='x'"),
                       doctest::Contains("test.toml:9: model.layers[1].name: layer name 'x' is used twice"), UserError);
}

TEST_CASE("model forward/backward: gradients accumulate across calls (+= contract)") {
  auto m = model_from(kCnn);
  m->params().initialize(1);
  Backend& be = cpu();
  Buffer x(be, Shape{2, 28, 28, 1});
  from_host(random_vector(2 * 784, 9, 0, 255), x.view());
  Ctx ctx{be, true, 0};
  m->zero_grads();
  m->forward(ctx, x.view());
  from_host(random_vector(20, 4), m->output_grad());
  m->backward(ctx);
  const auto once = to_host(m->params().grads());
  m->forward(ctx, x.view());
  from_host(random_vector(20, 4), m->output_grad());
  m->backward(ctx);
  const auto twice = to_host(m->params().grads());
  for (size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == doctest::Approx(2 * once[i]).epsilon(1e-5));
}

}  // namespace distrain::test
