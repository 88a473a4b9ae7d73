// Tensor parallelism, layer by layer: slices of whole variables, and Megatron's column- then
// row-parallel dense pair on ranks of a thread mesh against the same two layers whole, with
// the same initial values (each slice is the part of the whole variable one_device draws);
// then whole models: dense and conv2d pairs, batch norm and pooling on a slice, gathers.
#include <thread>

#include "core/comm/mesh.hpp"
#include "core/model/loss.hpp"
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

// Forward on x (batch 4 of the model's input shape), backward from dout; values after the
// pass (batch-norm moving statistics updated), gradients of the trainable variables.
ModelRun run_model(Model& m, Communicator* tensor, const std::vector<float>& x, const std::vector<float>& dout) {
  m.params().initialize(11);
  m.zero_grads();
  Buffer in(cpu(), m.input_shape().batched(4));
  from_host(x, in.view());
  Ctx ctx{cpu(), true, 1, nullptr, tensor};
  ModelRun r{to_host(m.forward(ctx, in.view())), {}, {}};
  from_host(dout, m.output_grad());
  m.backward(ctx);
  if (tensor) m.sum_sequence_shard_gradients(*tensor);  // as the mesh does before reducing
  for (size_t v = 0; v < m.params().variables().size(); ++v) {
    r.values.push_back(to_host(m.params().value(static_cast<int>(v))));
    if (m.params().variables()[v].trainable) r.grads.push_back(to_host(m.params().grad(static_cast<int>(v))));
    else r.grads.emplace_back();
  }
  return r;
}

// The model of `table` split over `degree` thread ranks, each run as run_model does.
struct SplitRun {
  std::vector<std::unique_ptr<Model>> models;
  std::vector<ModelRun> got;
};

SplitRun run_split(const toml::table& table, int degree, const std::vector<float>& x, const std::vector<float>& dout,
                   bool sequence = false) {
  SplitRun s;
  std::vector<Mesh> meshes = Mesh::over_threads(MeshShape{1, degree, 1});
  for (int r = 0; r < degree; ++r)
    s.models.push_back(
        std::make_unique<Model>(parse_model_spec(table, "m.toml"), cpu(), ModelSeams{}, TensorGroup{r, degree, sequence}));
  s.got.resize(static_cast<size_t>(degree));
  std::vector<std::thread> threads;
  for (int r = 0; r < degree; ++r)
    threads.emplace_back([&, r] {
      const auto k = static_cast<size_t>(r);
      s.got[k] = run_model(*s.models[k], &meshes[k].axis(Axis::tensor), x, dout);
    });
  for (auto& t : threads) t.join();
  return s;
}

// max |a - b| / max |a|, as check_close measures it.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(a[i])));
  }
  return diff / scale;
}

}  // namespace

TEST_CASE("tensor parallel model: dense pairs, a lone dense gathered and a replicated one match the whole model on 2 ranks") {
  const toml::table table = toml::parse(kMlp);
  const std::vector<float> x = random_vector(24, 5), dout = random_vector(12, 6);
  Model whole(parse_model_spec(table, "mlp.toml"), cpu());
  const ModelRun want = run_model(whole, nullptr, x, dout);
  std::vector<Mesh> meshes = Mesh::over_threads(MeshShape{1, 2, 1});
  std::vector<std::unique_ptr<Model>> models;
  for (int r = 0; r < 2; ++r) models.push_back(std::make_unique<Model>(parse_model_spec(table, "mlp.toml"), cpu(), ModelSeams{}, TensorGroup{r, 2}));
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
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(row_first, "m.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2}),
                       "m.toml: layer 'dense_1': tensor_parallel = \"row\" needs a column-parallel layer before it (with only "
                       "relu, dropout, rescaling, pooling or batch_norm between)",
                       UserError);
  const toml::table odd = toml::parse(R"(
input_shape = [6]
layers = [{ type = "dense", units = 10 }]
)");
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(odd, "m.toml"), cpu(), ModelSeams{}, TensorGroup{0, 4}),
                       "m.toml:3: model.layers[0]: layer 'dense_1': units = 10 does not split over a tensor degree of 4", UserError);
}


// Conv pairs: conv2d_1 column (its filters split) -> batch norm, relu, max pool on the
// slice -> conv2d_2 row; conv2d_3 column alone, its slice average-pooled and then gathered
// before relu and flatten; the dense layers pair up after. (No bias before batch norm: its
// gradient would be zero up to rounding, no test of anything.)
const char* kConvNet = R"(
input_shape = [10, 10, 2]
layers = [
  { type = "conv2d", filters = 4, kernel_size = 3, padding = "same", use_bias = false },
  { type = "batch_norm" },
  { type = "relu" },
  { type = "max_pool2d" },
  { type = "conv2d", filters = 6, kernel_size = 3, activation = "relu" },
  { type = "conv2d", filters = 4, kernel_size = 1 },
  { type = "avg_pool2d", padding = "same" },
  { type = "relu" },
  { type = "flatten" },
  { type = "dense", units = 4, activation = "relu" },
  { type = "dense", units = 3 },
]
)";

TEST_CASE("tensor parallel plan: conv2d column -> batch_norm, relu, pooling on the slice -> conv2d row, a gather before flatten") {
  const Model m(parse_model_spec(toml::parse(kConvNet), "m.toml"), cpu(), ModelSeams{}, TensorGroup{1, 2});
  std::vector<std::string> got;
  for (const auto& l : m.layers()) {
    const TensorSplit s = l->tensor_place().split;
    got.push_back(l->name() + (s == TensorSplit::column ? " column" : s == TensorSplit::row ? " row"
                               : s == TensorSplit::sliced ? " sliced" : ""));
  }
  CHECK(got == std::vector<std::string>{"conv2d_1 column", "batch_norm_1 sliced", "relu_1 sliced", "max_pool2d_1 sliced",
                                        "conv2d_2 row", "conv2d_3 column", "avg_pool2d_1 sliced", "tensor_gather_1",
                                        "relu_2", "flatten_1", "dense_1 column", "dense_2 row"});
  // Per-example shapes: half the channels on the slice, whole again after the row conv and the gather.
  CHECK(m.layers().size() == 12);
  const ParamArena& p = m.params();
  const Variable& k1 = p.variables()[static_cast<size_t>(p.find("conv2d_1", "kernel"))];
  CHECK(k1.shape == Shape{3, 3, 2, 2});
  CHECK(k1.full_shape == Shape{3, 3, 2, 4});
  CHECK(k1.slice.axis == 3);
  const Variable& k2 = p.variables()[static_cast<size_t>(p.find("conv2d_2", "kernel"))];
  CHECK(k2.shape == Shape{3, 3, 2, 6});
  CHECK(k2.slice.axis == 2);
  CHECK_FALSE(p.variables()[static_cast<size_t>(p.find("conv2d_2", "bias"))].slice.sliced());
  for (const char* name : {"gamma", "beta", "moving_mean", "moving_variance"}) {
    const Variable& v = p.variables()[static_cast<size_t>(p.find("batch_norm_1", name))];
    CAPTURE(name);
    CHECK(v.shape == Shape{2});
    CHECK(v.full_shape == Shape{4});
    CHECK(v.slice.index == 1);
  }
}

TEST_CASE("tensor parallel model: conv2d pairs with batch norm between, a gathered conv and dense pairs match the whole model") {
  const toml::table table = toml::parse(kConvNet);
  const std::vector<float> x = random_vector(4 * 10 * 10 * 2, 7), dout = random_vector(12, 8);
  Model whole(parse_model_spec(table, "m.toml"), cpu());
  const ModelRun want = run_model(whole, nullptr, x, dout);
  double worst = 0;
  for (int degree : {2, 4}) {
    CAPTURE(degree);
    const SplitRun split = run_split(table, degree, x, dout);
    for (int r = 0; r < degree; ++r) {
      const ModelRun& g = split.got[static_cast<size_t>(r)];
      check_close(g.out, want.out);
      // The loss of dout as the gradient of a linear loss: sum(out * dout).
      double loss = 0, want_loss = 0;
      for (size_t i = 0; i < dout.size(); ++i) {
        loss += static_cast<double>(g.out[i]) * dout[i];
        want_loss += static_cast<double>(want.out[i]) * dout[i];
      }
      CHECK(loss == doctest::Approx(want_loss).epsilon(1e-5));
      worst = std::max(worst, relative_error(want.out, g.out));
      const auto& vars = split.models[static_cast<size_t>(r)]->params().variables();
      REQUIRE(vars.size() == whole.params().variables().size());
      for (size_t v = 0; v < vars.size(); ++v) {
        CAPTURE(vars[v].layer + "/" + vars[v].name);
        CHECK(vars[v].full_shape == whole.params().variables()[v].shape);
        // Values (initial, and batch-norm moving statistics after the step) and gradients
        // are this rank's slices of the whole model's.
        const std::vector<float> value = slice_of(want.values[v], vars[v].full_shape, vars[v].slice);
        check_close(g.values[v], value);
        worst = std::max(worst, relative_error(value, g.values[v]));
        if (!vars[v].trainable) continue;
        const std::vector<float> grad = slice_of(want.grads[v], vars[v].full_shape, vars[v].slice);
        check_close(g.grads[v], grad);
        worst = std::max(worst, relative_error(grad, g.grads[v]));
      }
    }
  }
  MESSAGE("conv tensor parallel, degrees 2 and 4: largest relative difference " << worst);
}

TEST_CASE("tensor parallel model: conv2d filters that do not split, and conv2d overrides") {
  const toml::table odd = toml::parse(R"(
input_shape = [6, 6, 1]
layers = [{ type = "conv2d", filters = 6, kernel_size = 3 }, { type = "flatten" }]
)");
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(odd, "m.toml"), cpu(), ModelSeams{}, TensorGroup{0, 4}),
                       "m.toml:3: model.layers[0]: layer 'conv2d_1': filters = 6 does not split over a tensor degree of 4",
                       UserError);
  const toml::table row_first = toml::parse(R"(
input_shape = [6, 6, 1]
layers = [{ type = "conv2d", filters = 4, kernel_size = 3, tensor_parallel = "row" }]
)");
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(row_first, "m.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2}),
                       doctest::Contains("layer 'conv2d_1': tensor_parallel = \"row\" needs a column-parallel layer"), UserError);
  // replicated: conv2d_1 whole; the next conv is then column-parallel on its own, gathered
  // after the pool; tensor_parallel = "column" on the last conv keeps it from pairing.
  const toml::table overrides = toml::parse(R"(
input_shape = [8, 8, 1]
layers = [
  { type = "conv2d", filters = 4, kernel_size = 3, tensor_parallel = "replicated" },
  { type = "conv2d", filters = 4, kernel_size = 3 },
  { type = "max_pool2d" },
  { type = "conv2d", filters = 2, kernel_size = 1, tensor_parallel = "column" },
]
)");
  const Model m(parse_model_spec(overrides, "m.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2});
  std::vector<std::string> names;
  for (const auto& l : m.layers()) names.push_back(l->name());
  CHECK(names == std::vector<std::string>{"conv2d_1", "conv2d_2", "max_pool2d_1", "tensor_gather_1", "conv2d_3", "tensor_gather_2"});
  CHECK(m.layers()[0]->tensor_place().split == TensorSplit::none);
  CHECK(m.layers()[1]->tensor_place().split == TensorSplit::column);
  CHECK(m.layers()[4]->tensor_place().split == TensorSplit::column);
  CHECK(m.output_shape() == Shape{2, 2, 2});
}

}  // namespace distrain::test

namespace distrain::test {
namespace {

// A transformer block on float input (sequence 8, width 16) with its residual adds, then
// an untied head of 8 units: attention by heads, the MLP as a column/row pair with gelu on
// the slice, layer norms and adds whole, the head column-parallel and gathered.
const char* kBlock = R"(
input_shape = [8, 16]
layers = [
  { type = "layer_norm", name = "ln_1" },
  { type = "attention", name = "attn", heads = 4 },
  { type = "add", name = "attn_add", inputs = ["input", "attn"] },
  { type = "layer_norm", name = "ln_2" },
  { type = "dense", name = "fc", units = 32, kernel_initializer = "normal" },
  { type = "gelu", name = "gelu" },
  { type = "dense", name = "proj", units = 16, kernel_initializer = "gpt2_residual" },
  { type = "add", name = "mlp_add", inputs = ["attn_add", "proj"] },
  { type = "layer_norm", name = "ln_f" },
  { type = "dense", name = "head", units = 8 },
]
)";

std::string plan_of(const Model& m) {
  std::string s;
  for (const auto& l : m.layers()) {
    const TensorSplit p = l->tensor_place().split;
    s += l->name() + (p == TensorSplit::column ? ":column" : p == TensorSplit::row ? ":row" : p == TensorSplit::sliced ? ":sliced"
                      : p == TensorSplit::heads ? ":heads" : "");
    s += l->tensor_place().sequence ? "/seq " : " ";
  }
  return s;
}

// Whole-block outputs, values and gradients against each rank's (sliced) ones.
void check_against_whole(const ModelRun& want, const SplitRun& s, const Model& whole) {
  for (size_t r = 0; r < s.got.size(); ++r) {
    const ModelRun& g = s.got[r];
    CHECK(relative_error(want.out, g.out) < 1e-5);
    const auto& vars = s.models[r]->params().variables();
    REQUIRE(vars.size() == whole.params().variables().size());
    for (size_t v = 0; v < vars.size(); ++v) {
      CAPTURE(vars[v].layer + "/" + vars[v].name);
      CHECK(relative_error(slice_of(want.values[v], vars[v].full_shape, vars[v].slice), g.values[v]) < 1e-6);
      CHECK(relative_error(slice_of(want.grads[v], vars[v].full_shape, vars[v].slice), g.grads[v]) < 1e-5);
    }
  }
}

}  // namespace

TEST_CASE("tensor parallel transformer block: attention by heads, MLP pair, residual adds, on 2 and 4 ranks match the whole block") {
  const toml::table table = toml::parse(kBlock);
  const std::vector<float> x = random_vector(4 * 8 * 16, 21), dout = random_vector(4 * 8 * 8, 22);
  Model whole(parse_model_spec(table, "block.toml"), cpu());
  const ModelRun want = run_model(whole, nullptr, x, dout);
  for (int degree : {2, 4}) {
    CAPTURE(degree);
    SplitRun s = run_split(table, degree, x, dout);
    CHECK(plan_of(*s.models[0]) == "ln_1 attn:heads attn_add ln_2 fc:column gelu:sliced proj:row mlp_add ln_f head:column "
                                   "tensor_gather_1 ");
    // The head's gather is what the model outputs.
    CHECK(s.models[0]->layer_inputs(10) == std::vector<int>{9});
    check_against_whole(want, s, whole);
    // Rank 1 of 2 holds heads 2 and 3: columns 8..15 of each of the query, key and value blocks.
    if (degree == 2) {
      const ParamArena& p = s.models[1]->params();
      const Variable& qkv = p.variables()[static_cast<size_t>(p.find("attn", "qkv_kernel"))];
      CHECK(qkv.shape == Shape{16, 24});
      CHECK(qkv.slice.groups == 3);
      std::vector<float> full(16 * 48);
      for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i);
      const std::vector<float> mine = slice_of(full, qkv.full_shape, qkv.slice);
      CHECK(mine[0] == 8.0f);
      CHECK(mine[8] == 24.0f);
      CHECK(mine[16] == 40.0f);
      CHECK(mine[24] == 56.0f);  // row 1 starts at column 8 again
    }
  }
}

TEST_CASE("tensor parallel transformer block: heads that do not split, and attention kept whole on request") {
  const toml::table table = toml::parse(kBlock);
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(table, "block.toml"), cpu(), ModelSeams{}, TensorGroup{0, 8}),
                       "block.toml:5: model.layers[1]: layer 'attn': heads = 4 do not split over a tensor degree of 8: use a "
                       "degree that divides them",
                       UserError);
  std::string replicated = kBlock;
  const std::string key = "heads = 4";
  replicated.replace(replicated.find(key), key.size(), key + ", tensor_parallel = \"replicated\"");
  const Model m(parse_model_spec(toml::parse(replicated), "block.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2});
  CHECK(m.layers()[1]->tensor_place().split == TensorSplit::none);
}

// Tensor slices of an axis in groups: each rank holds its block of every group.
TEST_CASE("tensor slices: a grouped axis is cut group by group and rebuilt") {
  const Shape full{2, 12};
  std::vector<float> whole(24);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(i);
  std::vector<float> rebuilt(whole.size(), -1.0f);
  for (int k = 0; k < 2; ++k) {
    const TensorSlice s{1, k, 2, 3};
    CHECK(slice_shape(full, s) == Shape{2, 6});
    place_slice(slice_of(whole, full, s), full, s, rebuilt);
  }
  CHECK(rebuilt == whole);
  CHECK(slice_of(whole, full, TensorSlice{1, 1, 2, 3}) == std::vector<float>{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23});
}

// Sequence parallelism: the layer norms and adds on each rank's quarter or half of the
// positions, the input cut into shards first, attention and the MLP gathering them and
// reduce-scattering their outputs; layer norm's gradients summed over the tensor axis.
TEST_CASE("sequence parallel transformer block: layer norms and adds on sequence shards match the whole block on 2 and 4 ranks") {
  const toml::table table = toml::parse(kBlock);
  const std::vector<float> x = random_vector(4 * 8 * 16, 31), dout = random_vector(4 * 8 * 8, 32);
  Model whole(parse_model_spec(table, "block.toml"), cpu());
  const ModelRun want = run_model(whole, nullptr, x, dout);
  for (int degree : {2, 4}) {
    CAPTURE(degree);
    SplitRun s = run_split(table, degree, x, dout, true);
    CHECK(plan_of(*s.models[0]) == "sequence_scatter_input ln_1/seq attn:heads/seq attn_add/seq ln_2/seq fc:column/seq "
                                   "gelu:sliced proj:row/seq mlp_add/seq ln_f/seq head:column/seq tensor_gather_1 ");
    CHECK(s.models[0]->layer_shapes()[1] == Shape{8 / degree, 16});  // ln_1 on a shard
    CHECK(s.models[0]->layer_shapes()[5] == Shape{8, 32 / degree});  // fc: every position, its units' slice
    check_against_whole(want, s, whole);
  }
  // Activations kept per rank: the per-position layers' shrink by the degree. Four blocks,
  // since the largest layer's gathered sequence (counted once) outweighs one block's saving.
  const toml::table blocks = toml::parse(R"(
input_shape = [8, 16]
layers = [
  { type = "repeat", name = "h", count = 4, layers = [
    { type = "layer_norm", name = "ln_1" },
    { type = "attention", name = "attn", heads = 4 },
    { type = "add", name = "attn_add", inputs = ["input", "attn"] },
    { type = "layer_norm", name = "ln_2" },
    { type = "dense", name = "fc", units = 32 },
    { type = "gelu", name = "gelu" },
    { type = "dense", name = "proj", units = 16 },
    { type = "add", name = "mlp_add", inputs = ["attn_add", "proj"] },
  ] },
  { type = "layer_norm", name = "ln_f" },
  { type = "dense", name = "head", units = 8 },
]
)");
  const Model two(parse_model_spec(blocks, "blocks.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2, true});
  const Model plain(parse_model_spec(blocks, "blocks.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2, false});
  CHECK(two.activation_bytes(4) * 10 < plain.activation_bytes(4) * 9);
}

TEST_CASE("sequence parallel: a sequence that does not split over the tensor degree is refused naming the layer") {
  const toml::table table = toml::parse(kBlock);
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(table, "block.toml"), cpu(), ModelSeams{}, TensorGroup{0, 3, true}),
                       doctest::Contains("does not split over the tensor degree 3"), UserError);
}

}  // namespace distrain::test

namespace distrain::test {
namespace {

// A one-block language model over 11 tokens (a vocabulary no degree here divides) with
// GPT-2's tied head.
const char* kTinyLm = R"(
input_shape = [6]
layers = [
  { type = "embedding", name = "wte", input_dim = 11, output_dim = 12 },
  { type = "position_embedding", name = "wpe" },
  { type = "layer_norm", name = "ln_1" },
  { type = "attention", name = "attn", heads = 6 },
  { type = "add", name = "attn_add", inputs = ["wpe", "attn"] },
  { type = "layer_norm", name = "ln_f" },
  { type = "dense", name = "head", units = 11, tied_to = "wte", use_bias = false },
]
)";

struct LmRun {
  LossStats loss;
  std::vector<std::vector<float>> grads;  // per variable, as this rank holds them
};

// One forward, loss and backward of 3 sequences of 6 tokens, as Replica runs them.
LmRun run_lm(Model& m, Communicator* tensor) {
  m.params().initialize(5);
  m.zero_grads();
  std::vector<int32_t> ids(18), labels(18);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % 11), labels[i] = static_cast<int32_t>((i * 5 + 1) % 11);
  Buffer in(cpu(), Shape{3, 6}, DType::i32), y(cpu(), Shape{18}, DType::i32);
  cpu().upload(ids.data(), in.view());
  cpu().upload(labels.data(), y.view());
  Ctx ctx{cpu(), true, 1, nullptr, tensor};
  Loss loss(LossSpec{}, cpu());
  if (m.output_first_class()) loss.set_class_slice(*tensor, *m.output_first_class());
  LmRun r;
  const Tensor out = m.forward(ctx, in.view());
  r.loss = loss.compute(out, y.view(), 1.0f / 18, m.output_grad());
  m.backward(ctx);
  if (tensor) m.sum_sequence_shard_gradients(*tensor);
  for (size_t v = 0; v < m.params().variables().size(); ++v) r.grads.push_back(to_host(m.params().grad(static_cast<int>(v))));
  return r;
}

}  // namespace

// Megatron's vocabulary parallelism: the embedding's rows and the tied head's units split
// (11 tokens: slices of 6 and 5, or 4, 4 and 3), the logits never gathered, the
// cross-entropy combined from the slices; loss, accuracy and every gradient as one model's.
TEST_CASE("vocabulary parallel language model: embedding rows, tied head and cross-entropy split unevenly match the whole model") {
  std::string untied = kTinyLm;  // a head of its own, with a bias: its kernel and bias split by units
  const std::string tied = "tied_to = \"wte\", use_bias = false";
  untied.replace(untied.find(tied), tied.size(), "kernel_initializer = \"normal\"");
  for (const std::string& text : {std::string(kTinyLm), untied}) {
    const bool tied_head = text.find("tied_to") != std::string::npos;
    CAPTURE(tied_head);
    const toml::table table = toml::parse(text);
    Model whole(parse_model_spec(table, "lm.toml"), cpu());
    const LmRun want = run_lm(whole, nullptr);
    for (const bool sequence : {false, true})
      for (int degree : {2, 3}) {
        CAPTURE(sequence);
        CAPTURE(degree);
        std::vector<Mesh> meshes = Mesh::over_threads(MeshShape{1, degree, 1});
        std::vector<std::unique_ptr<Model>> models;
        for (int r = 0; r < degree; ++r)
          models.push_back(std::make_unique<Model>(parse_model_spec(table, "lm.toml"), cpu(), ModelSeams{},
                                                   TensorGroup{r, degree, sequence, VocabularySplit::required}));
        std::vector<LmRun> got(static_cast<size_t>(degree));
        std::vector<std::thread> threads;
        for (int r = 0; r < degree; ++r)
          threads.emplace_back([&, r] { got[static_cast<size_t>(r)] = run_lm(*models[static_cast<size_t>(r)], &meshes[static_cast<size_t>(r)].axis(Axis::tensor)); });
        for (auto& t : threads) t.join();
        const Variable& wte = models[static_cast<size_t>(degree - 1)]->params().variables()[0];
        CHECK(wte.shape == Shape{degree == 2 ? 6 : 4, 12});  // the last rank's rows: 5..10, or 7..10
        CHECK(models[0]->output_shape() == Shape{6, degree == 2 ? 5 : 3});
        CHECK(*models[static_cast<size_t>(degree - 1)]->output_first_class() == (degree == 2 ? 5 : 7));
        for (size_t r = 0; r < got.size(); ++r) {
          CHECK(got[r].loss.loss_sum == doctest::Approx(want.loss.loss_sum).epsilon(1e-6));
          CHECK(got[r].loss.correct == want.loss.correct);
          const auto& vars = models[r]->params().variables();
          for (size_t v = 0; v < vars.size(); ++v) {
            CAPTURE(vars[v].layer + "/" + vars[v].name);
            CHECK(relative_error(slice_of(want.grads[v], vars[v].full_shape, vars[v].slice), got[r].grads[v]) < 1e-5);
          }
        }
      }
  }
}

TEST_CASE("vocabulary parallel: where possible by default, refused with a reason when asked for and impossible") {
  const toml::table lm = toml::parse(kTinyLm);
  const Model auto_split(parse_model_spec(lm, "lm.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2, false, VocabularySplit::where_possible});
  CHECK(plan_of(auto_split) == "wte:row wpe ln_1 attn:heads attn_add ln_f head:column ");
  const Model off(parse_model_spec(lm, "lm.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2});
  CHECK(plan_of(off) == "wte wpe ln_1 attn:heads attn_add ln_f head ");
  CHECK_FALSE(off.output_first_class());
  // A block model without embeddings keeps its gathered head.
  const Model block(parse_model_spec(toml::parse(kBlock), "block.toml"), cpu(), ModelSeams{},
                    TensorGroup{0, 2, false, VocabularySplit::where_possible});
  CHECK_FALSE(block.output_first_class());
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(toml::parse(kBlock), "block.toml"), cpu(), ModelSeams{},
                             TensorGroup{0, 2, false, VocabularySplit::required}),
                       "block.toml: strategy.vocab_parallel = true, but the model has no embedding layer", UserError);
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(lm, "lm.toml"), cpu(), ModelSeams{}, TensorGroup{0, 16, false, VocabularySplit::required}),
                       "lm.toml: strategy.vocab_parallel = true, but layer 'wte' has fewer tokens than the 16 ranks", UserError);
  // A head that is the row half of an MLP pair keeps the vocabulary whole.
  const toml::table paired = toml::parse(R"(
input_shape = [6]
layers = [
  { type = "embedding", name = "wte", input_dim = 11, output_dim = 8 },
  { type = "dense", name = "fc", units = 16 },
  { type = "dense", name = "head", units = 11 },
]
)");
  const Model whole_vocabulary(parse_model_spec(paired, "p.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2, false, VocabularySplit::where_possible});
  CHECK(plan_of(whole_vocabulary) == "wte fc:column head:row ");
  CHECK_THROWS_WITH_AS(Model(parse_model_spec(paired, "p.toml"), cpu(), ModelSeams{}, TensorGroup{0, 2, false, VocabularySplit::required}),
                       "p.toml: strategy.vocab_parallel = true, but its last layer 'head' is the row half of a column/row pair",
                       UserError);
  std::string relu_head = kTinyLm;
  relu_head.replace(relu_head.find("use_bias = false"), 16, "use_bias = false, activation = \"relu\"");
  CHECK_THROWS_WITH_AS(parse_model_spec(toml::parse(relu_head), "lm.toml"), doctest::Contains("a head tied to an embedding gives logits"),
                       UserError);
}

}  // namespace distrain::test
