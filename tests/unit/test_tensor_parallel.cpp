// Tensor parallelism, layer by layer: slices of whole variables, and Megatron's column- then
// row-parallel dense pair on ranks of a thread mesh against the same two layers whole, with
// the same initial values (each slice is the part of the whole variable one_device draws).
#include <thread>

#include "core/comm/mesh.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

TEST_CASE("tensor slices: slice_of and place_slice cut and rebuild a variable along any axis") {
  const Shape full{4, 6, 2};
  std::vector<float> whole(48);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(i);
  for (int axis = 0; axis < 3; ++axis) {
    const int count = axis == 2 ? 2 : axis == 0 ? 4 : 3;
    std::vector<float> rebuilt(whole.size(), -1.0f);
    for (int k = 0; k < count; ++k) {
      const TensorSlice s{axis, k, count};
      const std::vector<float> part = slice_of(whole, full, s);
      CHECK(static_cast<int64_t>(part.size()) == slice_shape(full, s).numel());
      place_slice(part, full, s, rebuilt);
    }
    CHECK(rebuilt == whole);
  }
  // (4, 6, 2) in 3 slices of axis 1: rank 1 holds columns 2..3 of every row.
  const std::vector<float> mid = slice_of(whole, full, TensorSlice{1, 1, 3});
  CHECK(mid == std::vector<float>{4, 5, 6, 7, 16, 17, 18, 19, 28, 29, 30, 31, 40, 41, 42, 43});
}

// Two dense layers, d1 (6 -> 8, relu) and d2 (8 -> 3), on one rank: column then row when
// split over `degree` ranks, whole when degree is 1.
struct Pair {
  std::unique_ptr<Layer> d1, d2;
  ParamArena arena;
  std::unique_ptr<ArenaStorage> storage;
  Shape mid;

  Pair(int rank, int degree) {
    d1 = make_layer("type = \"dense\"\nunits = 8\nactivation = \"relu\"");
    d2 = make_layer("type = \"dense\"\nunits = 3");
    d1->set_name("d1");
    d2->set_name("d2");
    if (degree > 1) {
      d1->set_tensor_place(TensorPlace{TensorSplit::column, rank, degree});
      d2->set_tensor_place(TensorPlace{TensorSplit::row, rank, degree});
    }
    mid = d1->setup(Shape{6}, arena);
    CHECK(d2->setup(mid, arena) == Shape{3});
    storage = allocate_arena(arena, cpu());
    arena.initialize(7);
  }
};

struct Result {
  std::vector<float> out, din;
  std::vector<std::vector<float>> grads;  // per variable, as this rank holds it
};

// Forward on x (4, 6), backward from dout (4, 3).
Result run(Pair& p, Communicator* tensor, const std::vector<float>& x, const std::vector<float>& dout) {
  Backend& be = cpu();
  Buffer in(be, Shape{4, 6}), mid(be, p.mid.batched(4)), out(be, Shape{4, 3}), dmid(be, p.mid.batched(4)),
      dy(be, Shape{4, 3}), din(be, Shape{4, 6});
  from_host(x, in.view());
  from_host(dout, dy.view());
  Ctx ctx{be, true, 1, nullptr, tensor};
  for (size_t i = 0; i < p.arena.variables().size(); ++i) be.fill(p.arena.grad(static_cast<int>(i)), 0.0f);
  p.d1->forward(ctx, in.view(), mid.view());
  p.d2->forward(ctx, mid.view(), out.view());
  p.d2->backward(ctx, mid.view(), out.view(), dy.view(), dmid.view());
  p.d1->backward(ctx, in.view(), mid.view(), dmid.view(), din.view());
  Result r{to_host(out.view()), to_host(din.view()), {}};
  for (size_t i = 0; i < p.arena.variables().size(); ++i) r.grads.push_back(to_host(p.arena.grad(static_cast<int>(i))));
  return r;
}

TEST_CASE("tensor parallel dense: a column- then row-parallel pair on 2 and 4 ranks matches the whole pair") {
  const std::vector<float> x = random_vector(24, 3), dout = random_vector(12, 4);
  Pair whole(0, 1);
  const Result want = run(whole, nullptr, x, dout);
  for (int degree : {2, 4}) {
    CAPTURE(degree);
    std::vector<Mesh> meshes = Mesh::over_threads(MeshShape{1, degree, 1});
    std::vector<std::unique_ptr<Pair>> pairs;
    for (int r = 0; r < degree; ++r) pairs.push_back(std::make_unique<Pair>(r, degree));
    std::vector<Result> got(static_cast<size_t>(degree));
    std::vector<std::thread> threads;
    for (int r = 0; r < degree; ++r)
      threads.emplace_back([&, r] {
        got[static_cast<size_t>(r)] = run(*pairs[static_cast<size_t>(r)], &meshes[static_cast<size_t>(r)].axis(Axis::tensor), x, dout);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < degree; ++r) {
      const Result& g = got[static_cast<size_t>(r)];
      check_close(g.out, want.out);  // every rank holds the whole output
      check_close(g.din, want.din);  // and the whole input gradient
      const ParamArena& arena = pairs[static_cast<size_t>(r)]->arena;
      for (size_t v = 0; v < arena.variables().size(); ++v) {
        const Variable& var = arena.variables()[v];
        CAPTURE(var.name);
        CHECK(var.full_shape == whole.arena.variables()[v].shape);
        // Initial values and gradients are this rank's slices of the whole pair's.
        check_close(to_host(arena.value(static_cast<int>(v))),
                    slice_of(to_host(whole.arena.value(static_cast<int>(v))), var.full_shape, var.slice));
        check_close(g.grads[v], slice_of(want.grads[v], var.full_shape, var.slice));
      }
    }
  }
}

TEST_CASE("tensor parallel dense: units that do not split over the degree are refused naming the layer") {
  auto d = make_layer("type = \"dense\"\nunits = 10");
  d->set_name("dense_3");
  d->set_tensor_place(TensorPlace{TensorSplit::column, 0, 4});
  ParamArena arena;
  CHECK_THROWS_WITH_AS(d->setup(Shape{6}, arena), "layer 'dense_3': units = 10 does not split over a tensor degree of 4",
                       UserError);
}

}  // namespace
}  // namespace distrain::test

namespace distrain::test {
namespace {

const char* kMlp = R"(
input_shape = [6]
layers = [
  { type = "dense", units = 8, activation = "relu" },
  { type = "rescaling", scale = 0.5 },
  { type = "dense", units = 4 },
  { type = "dense", units = 6, activation = "relu" },
  { type = "dense", units = 3, tensor_parallel = "replicated" },
]
)";

struct ModelRun {
  std::vector<float> out;
  std::vector<std::vector<float>> values, grads;  // per variable, as this rank holds them
};

ModelRun run_model(Model& m, Communicator* tensor, const std::vector<float>& x, const std::vector<float>& dout) {
  m.params().initialize(11);
  m.zero_grads();
  Buffer in(cpu(), Shape{4, 6});
  from_host(x, in.view());
  Ctx ctx{cpu(), true, 1, nullptr, tensor};
  ModelRun r{to_host(m.forward(ctx, in.view())), {}, {}};
  from_host(dout, m.output_grad());
  m.backward(ctx);
  for (size_t v = 0; v < m.params().variables().size(); ++v) {
    r.values.push_back(to_host(m.params().value(static_cast<int>(v))));
    r.grads.push_back(to_host(m.params().grad(static_cast<int>(v))));
  }
  return r;
}

}  // namespace

TEST_CASE("tensor parallel model: dense pairs, a lone dense gathered and a replicated one match the whole model on 2 ranks") {
  const toml::table table = toml::parse(kMlp);
  const std::vector<float> x = random_vector(24, 5), dout = random_vector(12, 6);
  Model whole(table, "mlp.toml", cpu());
  const ModelRun want = run_model(whole, nullptr, x, dout);
  std::vector<Mesh> meshes = Mesh::over_threads(MeshShape{1, 2, 1});
  std::vector<std::unique_ptr<Model>> models;
  for (int r = 0; r < 2; ++r) models.push_back(std::make_unique<Model>(table, "mlp.toml", cpu(), ModelSeams{}, TensorGroup{r, 2}));
  std::vector<std::string> names;
  for (const auto& l : models[0]->layers()) names.push_back(l->name());
  CHECK(names == std::vector<std::string>{"dense_1", "rescaling_1", "dense_2", "dense_3", "tensor_gather_1", "dense_4"});
  std::vector<ModelRun> got(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] { got[static_cast<size_t>(r)] = run_model(*models[static_cast<size_t>(r)], &meshes[static_cast<size_t>(r)].axis(Axis::tensor), x, dout); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    check_close(got[static_cast<size_t>(r)].out, want.out);
    const auto& vars = models[static_cast<size_t>(r)]->params().variables();
    REQUIRE(vars.size() == whole.params().variables().size());
    for (size_t v = 0; v < vars.size(); ++v) {
      CAPTURE(vars[v].layer + "/" + vars[v].name);
      check_close(got[static_cast<size_t>(r)].values[v], slice_of(want.values[v], vars[v].full_shape, vars[v].slice));
      check_close(got[static_cast<size_t>(r)].grads[v], slice_of(want.grads[v], vars[v].full_shape, vars[v].slice));
    }
  }
  // dense_1 is split by columns, dense_2 by rows, dense_3 by columns (then gathered); dense_4 whole.
  CHECK(models[1]->params().variables()[0].slice.axis == 1);
  CHECK(models[1]->params().variables()[2].slice.axis == 0);
  CHECK(models[1]->params().variables()[4].slice.axis == 1);
  CHECK_FALSE(models[1]->params().variables()[6].slice.sliced());
}

TEST_CASE("tensor parallel model: impossible splits are refused before any work, naming the layer") {
  const toml::table row_first = toml::parse(R"(
input_shape = [6]
layers = [{ type = "dense", units = 4, tensor_parallel = "row" }]
)");
  CHECK_THROWS_WITH_AS(Model(row_first, "m.toml", cpu(), ModelSeams{}, TensorGroup{0, 2}),
                       "m.toml: layer 'dense_1': tensor_parallel = \"row\" needs a column-parallel layer before it (with only "
                       "relu, dropout or rescaling between)",
                       UserError);
  const toml::table odd = toml::parse(R"(
input_shape = [6]
layers = [{ type = "dense", units = 10 }]
)");
  CHECK_THROWS_WITH_AS(Model(odd, "m.toml", cpu(), ModelSeams{}, TensorGroup{0, 4}),
                       "m.toml: model.layers[0]: layer 'dense_1': units = 10 does not split over a tensor degree of 4", UserError);
}

}  // namespace distrain::test
