// Pipeline parallelism without MPI: the schedules' order and memory bound, a simulation of
// the stages' blocking receives (no schedule deadlocks), the cut into stages, and a model
// cut in two that computes what the whole model computes (outputs, input gradients passed
// back, parameter gradients). tests/dist/dist_test.sh pipeline runs the stages over MPI.
#include <algorithm>

#include <array>
#include <thread>

#include "core/comm/mesh.hpp"
#include "core/io/recipe.hpp"
#include "core/model/no_storage.hpp"
#include "core/model/stage_partition.hpp"
#include "core/strategy/pipeline_schedule.hpp"
#include "core/strategy/replica.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

const char* kChain = R"(
input_shape = [6]
layers = [
  { type = "dense", units = 8, activation = "relu" },
  { type = "rescaling", scale = 0.5 },
  { type = "dense", units = 16, activation = "relu" },
  { type = "dense", units = 16, activation = "relu" },
  { type = "dense", units = 3 },
]
)";

const char* kRecipe = R"(
name = "pipeline"
seed = 9
[data]
dataset = "synthetic"
train_examples = 64
test_examples = 16
image_shape = [8, 8, 1]
[model]
input_shape = [8, 8, 1]
layers = [
  { type = "rescaling", scale = 0.00392156862745098 },
  { type = "conv2d", filters = 4, kernel_size = 3, activation = "relu" },
  { type = "max_pool2d" },
  { type = "flatten" },
  { type = "dense", units = 12, activation = "relu" },
  { type = "dense", units = 10 },
]
[strategy]
per_replica_batch = 12
)";

// Runs every stage's operations as far as its receives allow: F(i) on stage s needs F(i)
// done on s - 1, B(i) needs B(i) done on s + 1 (sends never block). True when all finish.
bool runs_to_the_end(PipeSchedule schedule, int stages, int micro) {
  std::vector<std::vector<PipeOp>> ops;
  for (int s = 0; s < stages; ++s) ops.push_back(pipeline_ops(schedule, s, stages, micro));
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<std::vector<bool>> forward_done(static_cast<size_t>(stages), std::vector<bool>(static_cast<size_t>(micro)));
  auto backward_done = forward_done;
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      const auto k = static_cast<size_t>(s);
      while (next[k] < ops[k].size()) {
        const PipeOp op = ops[k][next[k]];
        const auto i = static_cast<size_t>(op.micro);
        const bool ready = op.forward ? s == 0 || forward_done[k - 1][i] : s == stages - 1 || backward_done[k + 1][i];
        if (!ready) break;
        (op.forward ? forward_done : backward_done)[k][i] = true;
        ++next[k];
        progress = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s)
    if (next[static_cast<size_t>(s)] != ops[static_cast<size_t>(s)].size()) return false;
  return true;
}

}  // namespace

TEST_CASE("pipeline schedules: each micro-batch forward then backward, in order, within the in-flight bound, no deadlock") {
  for (PipeSchedule schedule : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b})
    for (int p = 1; p <= 4; ++p)
      for (int m = 1; m <= 8; ++m)
        for (int s = 0; s < p; ++s) {
          INFO("schedule " << (schedule == PipeSchedule::gpipe ? "gpipe" : "1f1b") << ", P " << p << ", M " << m << ", stage " << s);
          const std::vector<PipeOp> ops = pipeline_ops(schedule, s, p, m);
          REQUIRE(ops.size() == static_cast<size_t>(2 * m));
          int forwards = 0, backwards = 0, most = 0;
          for (const PipeOp& op : ops) {
            if (op.forward) {
              CHECK(op.micro == forwards++);
            } else {
              CHECK(op.micro == backwards++);
              CHECK(op.micro < forwards);
            }
            most = std::max(most, forwards - backwards);
          }
          CHECK(most == micro_batches_in_flight(schedule, s, p, m));
          CHECK(most == (schedule == PipeSchedule::gpipe ? m : std::min(p - s, m)));
        }
  for (PipeSchedule schedule : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b})
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 10; ++m) CHECK(runs_to_the_end(schedule, p, m));
}

TEST_CASE("stage partition: balanced by estimated cost, or at the named layers, and bad requests name the key") {
  const Model m(parse_model_spec(toml::parse(kChain), "m.toml"), cpu());
  const std::vector<double> costs = layer_costs(m);
  REQUIRE(costs.size() == 5);
  CHECK(costs[0] == 6.0 * (6 * 8 + 8));  // dense: 6 x weights x 1 position
  CHECK(costs[1] == 3.0 * 8);             // rescaling: 3 x its outputs
  const StagePlan two = plan_stages(m, 2, {}, "m.toml");
  CHECK(two.first == std::vector<size_t>{0, 3, 5});  // (336 + 24 + 864) vs (1632 + 306)
  CHECK(two.cost[0] + two.cost[1] == doctest::Approx(costs[0] + costs[1] + costs[2] + costs[3] + costs[4]));
  CHECK(two.stage_of(2) == 0);
  CHECK(two.stage_of(3) == 1);
  CHECK(two.part(1).input_grad);
  CHECK_FALSE(two.part(0).input_grad);
  const StagePlan named = plan_stages(m, 3, {"dense_2", "dense_4"}, "m.toml");
  CHECK(named.first == std::vector<size_t>{0, 2, 4, 5});
  CHECK(plan_stages(m, 5, {}, "m.toml").first == std::vector<size_t>{0, 1, 2, 3, 4, 5});
  CHECK_THROWS_WITH_AS(plan_stages(m, 6, {}, "m.toml"), doctest::Contains("m.toml: strategy.pipeline = 6 stages for a model of 5 layers"),
                       UserError);
  CHECK_THROWS_WITH_AS(plan_stages(m, 2, {"dense_9"}, "m.toml"), doctest::Contains("no layer is named 'dense_9'"), UserError);
  CHECK_THROWS_WITH_AS(plan_stages(m, 3, {"dense_3", "dense_2"}, "m.toml"), doctest::Contains("must come after"), UserError);
  CHECK_THROWS_WITH_AS(plan_stages(m, 2, {"dense_1"}, "m.toml"), doctest::Contains("must come after"), UserError);
}

TEST_CASE("a model cut in two stages computes the whole model's output, input gradient and parameter gradients") {
  const ModelSpec spec = parse_model_spec(toml::parse(kChain), "m.toml");
  Model whole(spec, cpu());
  Model first(spec, cpu(), ModelSeams{}, TensorGroup{}, ModelPart{0, 3, false});
  Model second(spec, cpu(), ModelSeams{}, TensorGroup{}, ModelPart{3, 5, true});
  CHECK(first.layers().size() == 3);
  CHECK(second.layers().front()->name() == "dense_3");
  CHECK(second.input_shape() == Shape{16});
  CHECK(first.params().variables().size() + second.params().variables().size() == whole.params().variables().size());
  for (Model* m : {&whole, &first, &second}) {
    m->params().initialize(7);
    m->zero_grads();
  }
  const std::vector<float> x = random_vector(4 * 6, 3), dout = random_vector(4 * 3, 4);
  Buffer in(cpu(), Shape{4, 6});
  from_host(x, in.view());
  Ctx ctx{cpu(), true, 1, nullptr, nullptr};
  const std::vector<float> want = to_host(whole.forward(ctx, in.view()));
  from_host(dout, whole.output_grad());
  whole.backward(ctx);
  // Stage 0's output is stage 1's input; stage 1's input gradient is stage 0's output gradient.
  const Tensor mid = first.forward(ctx, in.view());
  CHECK(to_host(second.forward(ctx, mid)) == want);
  from_host(dout, second.output_grad());
  second.backward(ctx);
  from_host(to_host(second.input_grad()), first.output_grad());
  first.backward(ctx);
  for (const Model* part : {&first, &second})
    for (size_t v = 0; v < part->params().variables().size(); ++v) {
      const Variable& var = part->params().variables()[v];
      INFO(var.layer << "/" << var.name);
      CHECK(to_host(part->params().grad(static_cast<int>(v))) == to_host(whole.params().grad(whole.params().find(var.layer, var.name))));
    }
}

TEST_CASE("pipeline stages on thread ranks: every schedule and micro-batch count gives one model's loss and gradients") {
  const Recipe recipe = parse_recipe(kRecipe, "p.toml");
  ReplicaSlice slice;
  slice.count = 12;
  for (float v : random_vector(12 * 64, 21, 0.0, 255.0)) slice.images.push_back(v);
  for (int i = 0; i < 12; ++i) slice.labels.push_back(i % 10);
  Replica whole(recipe, cpu());
  whole.model().params().initialize(recipe.seed);
  whole.model().zero_grads();
  float sums[2];
  whole.forward_backward(slice, 1.0f / 12, 5, host_tensor(sums, 2));
  const LossStats want{sums[0], static_cast<int64_t>(sums[1]), 12};
  const Model layout(recipe.model(), cpu(), storage_free_seams());
  for (int p : {2, 3})
    for (PipeSchedule schedule : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b})
      for (int m : {1, 3, 4, 12}) {
        INFO("P " << p << ", " << (schedule == PipeSchedule::gpipe ? "gpipe" : "1f1b") << ", M " << m);
        const StagePlan plan = plan_stages(layout, p, {}, recipe.file);
        std::vector<Mesh> meshes = Mesh::over_threads(MeshShape{1, 1, p});
        std::vector<std::unique_ptr<Replica>> stages;
        for (int st = 0; st < p; ++st) {
          const StagePlace place{plan.part(st), st, p, m, schedule, &meshes[static_cast<size_t>(st)].axis(Axis::pipeline)};
          stages.push_back(std::make_unique<Replica>(recipe, cpu(), ModelSeams{}, nullptr, place));
          stages.back()->model().params().initialize(recipe.seed);
          stages.back()->model().zero_grads();
        }
        std::vector<std::array<float, 2>> got(static_cast<size_t>(p), {-1.0f, -1.0f});
        std::vector<std::thread> threads;
        for (int st = 0; st < p; ++st)
          threads.emplace_back([&, st] {
            const auto s = static_cast<size_t>(st);
            stages[s]->forward_backward(slice, 1.0f / 12, 5, host_tensor(got[s].data(), 2));
          });
        for (auto& t : threads) t.join();
        CHECK(got.front()[0] == 0.0f);  // only the last stage has losses
        CHECK(static_cast<int64_t>(got.back()[1]) == want.correct);
        CHECK(got.back()[0] == doctest::Approx(want.loss_sum).epsilon(1e-6));
        for (const auto& stage : stages) {
          const ParamArena& a = stage->model().params();
          for (size_t v = 0; v < a.variables().size(); ++v) {
            const Variable& var = a.variables()[v];
            INFO(var.layer << "/" << var.name);
            const std::vector<float> g = to_host(a.grad(static_cast<int>(v)));
            const std::vector<float> w = to_host(whole.model().params().grad(whole.model().params().find(var.layer, var.name)));
            float scale = 1e-30f, diff = 0;
            for (size_t i = 0; i < w.size(); ++i) scale = std::max(scale, std::abs(w[i])), diff = std::max(diff, std::abs(w[i] - g[i]));
            CHECK(diff / scale < 1e-5f);
          }
        }
      }
}

}  // namespace distrain::test
