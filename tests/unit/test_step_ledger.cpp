// The step ledger: steps' figures written where they are computed and read later, many at
// once. Reading them after every step or only when the ledger is full or an epoch ends
// must change nothing: not a figure, not a weight; a non-finite step is still named and
// never saved.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "core/backend/cuda_plugin.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/step_ledger.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/step_loop.hpp"
#include "core/train/step_timing.hpp"
#include "core/train/trainer.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

// The GPU cases run where a GPU is (their CPU twins everywhere): there the finiteness
// check is a device-side column sum, read later.
bool have_gpu() {
  const GpuInfo g = gpu_info();
  if (g.built && !g.devices.empty()) return true;
  MESSAGE("[skipped] no usable GPU here: " << g.problem);
  return false;
}

void write_losses(Tensor slot, float loss, float correct) { from_host({loss, correct}, slot); }

// Steps of distinct batches drawn from a seed, so that each step's figures differ.
class DrawnBatches final : public BatchSource {
 public:
  // poisoned: the 1-based step whose first image gets a NaN pixel (0: none).
  DrawnBatches(int replicas, int64_t per_replica, int64_t steps, int64_t poisoned = 0) {
    for (int64_t s = 0; s < steps; ++s) {
      Batch b;
      b.index = s;
      b.global_count = replicas * per_replica;
      for (int r = 0; r < replicas; ++r) {
        ReplicaSlice slice;
        slice.count = per_replica;
        slice.images = random_vector(static_cast<size_t>(per_replica * 36), static_cast<uint64_t>(100 * s + r), 0.0, 255.0);
        for (int64_t i = 0; i < per_replica; ++i) slice.labels.push_back(static_cast<int32_t>((s * 7 + r * 3 + i) % 10));
        if (s + 1 == poisoned && r == 0) slice.images[7] = std::numeric_limits<float>::quiet_NaN();
        b.replicas.push_back(std::move(slice));
      }
      batches_.push_back(std::move(b));
    }
  }
  void start(int64_t, int64_t first) override { next_ = static_cast<size_t>(first); }
  const Batch* next() override { return next_ < batches_.size() ? &batches_[next_++] : nullptr; }

 private:
  std::vector<Batch> batches_;
  size_t next_ = 0;
};

// Reads after every step, or leaves the reads to the loop (ledger full, epoch end).
class Recorder final : public StepObserver {
 public:
  explicit Recorder(bool every_step) : every_step_(every_step) {}
  bool needs_figures(const TrainState&) const override { return every_step_; }
  void step_read(const StepResult& r, bool skipped) override {
    CHECK_FALSE(skipped);
    results.push_back(r);
  }
  bool after_step(const TrainState&, const StepDone& step) override {
    reads += step.read;
    ++steps;
    return false;
  }
  void end_epoch(const TrainState& state, double) override { epochs.push_back(state.epoch_stats); }

  std::vector<StepResult> results;
  std::vector<LossStats> epochs;
  int reads = 0, steps = 0;

 private:
  bool every_step_;
};

// On a GPU, convolutions choose their cuDNN algorithms by timing each time a model is made,
// so two runs can round differently: the GPU cases train dense layers (cuBLAS keeps one
// algorithm per shape) and hold the two read patterns to the same bits there too.
const char* kConvLayers = R"(
  { type = "conv2d", filters = 4, kernel_size = 3, activation = "relu" },
  { type = "batch_norm" },
  { type = "flatten" },)";
const char* kDenseLayers = R"(
  { type = "flatten" },
  { type = "dense", units = 16, activation = "relu" },)";

std::string loop_recipe(const std::string& strategy, const std::string& devices) {
  const bool gpu = devices.find("cuda") != std::string::npos;
  return fmt::format(R"(
name = "ledger"
seed = 3
[model]
input_shape = [6, 6, 1]
layers = [
  {{ type = "rescaling", scale = 0.00392156862745098 }},{}
  {{ type = "dense", units = 10 }},
]
[optimizer]
type = "adam"
learning_rate = 0.01
[strategy]
name = "{}"
devices = [{}]
per_replica_batch = 4
)",
                     gpu ? kDenseLayers : kConvLayers, strategy, devices);
}

struct LoopRun {
  Recorder recorder;
  std::vector<float> weights;
};

// 2 epochs of 70 steps: past the ledger's capacity within an epoch.
void run_loop(const std::string& text, int replicas, LoopRun& run) {
  const Recipe recipe = parse_recipe(text, "ledger.toml");
  auto strategy = make_strategy(recipe);
  strategy->model_state().initialize(recipe.seed);
  strategy->sync_replicas();
  LoopPlan plan;
  plan.epochs = 2;
  plan.batches_per_epoch = 70;
  plan.total_steps = 140;
  plan.seed = recipe.seed;
  DrawnBatches batches(replicas, 4, 70);
  const LrSchedule schedule(recipe.optimizer.learning_rate, recipe.schedule, 4 * replicas, plan.total_steps);
  StepLoop(*strategy, batches, plan, schedule, run.recorder).run(TrainState{});
  strategy->prepare_for_read();
  run.weights = to_host(strategy->model().params().values());
  const std::vector<float> state = to_host(strategy->model().params().state());
  run.weights.insert(run.weights.end(), state.begin(), state.end());
}

}  // namespace

TEST_CASE("step ledger: rows in order, sources summed in order, empty slices not counted, checks on the host and as sums") {
  StepLedger ledger;
  CHECK(ledger.add_source(cpu()) == 0);
  CHECK(ledger.add_source(cpu()) == 1);
  std::vector<float> grads(48, 0.5f);
  for (int s = 1; s <= 3; ++s) {
    ledger.begin_step();
    write_losses(ledger.loss_slot(0, 4), 1.5f * static_cast<float>(s), 3.0f);
    if (s != 2) write_losses(ledger.loss_slot(1, 2), 0.25f, 1.0f);  // step 2: replica 1 had no examples
    if (s == 3) grads[17] = std::numeric_limits<float>::infinity();
    ledger.check(cpu(), host_tensor(grads.data(), 48));
    ledger.commit(s);
  }
  ledger.begin_step();
  ledger.record_losses(LossStats{9.0, 5, 7});
  CHECK(ledger.losses_now().loss_sum == 9.0);
  ledger.check(false);
  ledger.commit(4);
  CHECK(ledger.unread() == 4);
  const std::vector<StepResult> got = ledger.read();
  REQUIRE(got.size() == 4);
  CHECK(ledger.unread() == 0);
  CHECK(got[0].step == 1);
  CHECK(got[0].stats.loss_sum == 1.75);
  CHECK(got[0].stats.correct == 4);
  CHECK(got[0].stats.count == 6);
  CHECK(got[0].finite);
  CHECK(got[1].stats.loss_sum == 3.0);
  CHECK(got[1].stats.count == 4);  // replica 1's slot from step 1 is not counted again
  CHECK(got[1].finite);
  CHECK(got[2].stats.loss_sum == 4.75);
  CHECK_FALSE(got[2].finite);
  CHECK(got[3].stats.loss_sum == 9.0);
  CHECK(got[3].stats.count == 7);
  CHECK_FALSE(got[3].finite);
  CHECK(ledger.read().empty());

  // The rows a read leaves are reused from the first; misuse is an internal error.
  ledger.begin_step();
  write_losses(ledger.loss_slot(0, 1), 2.0f, 1.0f);
  CHECK(ledger.losses_now().loss_sum == 2.0);
  CHECK_THROWS_AS(ledger.commit(5), Error);  // not checked
  ledger.check(true);
  ledger.commit(5);
  CHECK_THROWS_AS(ledger.loss_slot(0, 1), Error);  // no step open
  for (int s = 6; s < 6 + StepLedger::kCapacity - 1; ++s) {
    ledger.begin_step();
    ledger.check(true);
    ledger.commit(s);
  }
  CHECK_THROWS_AS(ledger.begin_step(), Error);  // full
  CHECK(ledger.read().size() == static_cast<size_t>(StepLedger::kCapacity));
}

namespace {

// Reads after every step and reads left to the loop give the same figures and weights.
void check_read_patterns(const std::string& name, const std::string& devices, int replicas) {
  CAPTURE(name);
  CAPTURE(devices);
  LoopRun every{Recorder(true), {}}, lazy{Recorder(false), {}};
  run_loop(loop_recipe(name, devices), replicas, every);
  run_loop(loop_recipe(name, devices), replicas, lazy);
  CHECK(every.recorder.reads == 140);
  CHECK(lazy.recorder.reads == 4);  // at 64 and 70 in each epoch
  REQUIRE(every.recorder.results.size() == 140);
  REQUIRE(lazy.recorder.results.size() == 140);
  for (size_t i = 0; i < 140; ++i) {
    CAPTURE(i);
    const StepResult &a = every.recorder.results[i], &b = lazy.recorder.results[i];
    CHECK(a.step == static_cast<int64_t>(i) + 1);
    CHECK(b.step == a.step);
    CHECK(b.stats.loss_sum == a.stats.loss_sum);
    CHECK(b.stats.correct == a.stats.correct);
    CHECK(b.stats.count == 4 * replicas);
    CHECK(b.finite);
  }
  REQUIRE(lazy.recorder.epochs.size() == 2);
  for (size_t e = 0; e < 2; ++e) {
    CHECK(lazy.recorder.epochs[e].loss_sum == every.recorder.epochs[e].loss_sum);
    CHECK(lazy.recorder.epochs[e].count == 280 * replicas);
  }
  CHECK(lazy.weights == every.weights);
}

}  // namespace

TEST_CASE("finiteness sums: any NaN or infinity makes a column's sum non-finite, in 16 columns or 1") {
  for (const int64_t n : {48, 47, 16, 5, 0}) {
    CAPTURE(n);
    for (const int64_t bad : {int64_t{-1}, n - 1, n / 2}) {
      if (bad >= n) continue;
      CAPTURE(bad);
      std::vector<float> v = random_vector(static_cast<size_t>(n), 7, -1e30, 1e30);
      if (bad >= 0) v[static_cast<size_t>(bad)] = bad % 2 ? std::numeric_limits<float>::quiet_NaN() : -INFINITY;
      std::vector<float> sums(kFinitenessColumns, 99.0f);
      finiteness_sums(cpu(), host_tensor(v.data(), n), host_tensor(sums.data(), kFinitenessColumns));
      const bool finite = std::all_of(sums.begin(), sums.end(), [](float x) { return std::isfinite(x); });
      CHECK(finite == (bad < 0));
      CHECK(finite == all_finite(cpu(), host_tensor(v.data(), n)));
      if (n % kFinitenessColumns != 0)
        for (size_t c = 1; c < sums.size(); ++c) CHECK(sums[c] == 0.0f);  // one column used, the rest cleared
    }
  }
}

TEST_CASE("reading step figures every step or only at a full ledger and epoch ends gives the same figures and weights") {
  check_read_patterns("one_device", "\"cpu:0\"", 1);
  check_read_patterns("mirrored", "\"cpu:0\", \"cpu:1\"", 2);
  check_read_patterns("central_storage", "\"cpu:0\", \"cpu:1\"", 2);
  check_read_patterns("zero", "\"cpu:0\", \"cpu:1\"", 2);
}

TEST_CASE("cuda: reading step figures every step or in batches gives the same figures and weights") {
  if (!have_gpu()) return;
  check_read_patterns("one_device", "\"cuda:0\"", 1);
  check_read_patterns("mirrored", "\"cuda:0\", \"cuda:0\"", 2);
}

TEST_CASE("cuda: the step ledger's finiteness check on the device, read later") {
  if (!have_gpu()) return;
  Backend& gpu = backend_for(Device{DeviceType::cuda, 0});
  StepLedger ledger;
  ledger.add_source(gpu);
  const std::vector<int64_t> sizes = {48, 48, 47, 47, 5000, 5000};  // 47: one column
  std::vector<Buffer> grads;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<float> g = random_vector(static_cast<size_t>(sizes[i]), i + 1);
    if (i % 2 == 1) g[static_cast<size_t>(sizes[i]) - 2] = i == 3 ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
    grads.emplace_back(gpu, Shape{sizes[i]});
    gpu.upload(g.data(), grads.back().view());
    ledger.begin_step();
    const float losses[2] = {0.5f, 1.0f};
    gpu.upload(losses, ledger.loss_slot(0, 2));
    ledger.check(gpu, grads.back().view());
    ledger.commit(static_cast<int64_t>(i) + 1);
  }
  const std::vector<StepResult> got = ledger.read();
  REQUIRE(got.size() == sizes.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i].finite == (i % 2 == 0));
    CHECK(got[i].stats.loss_sum == 0.5);
    CHECK(got[i].stats.correct == 1);
  }
}

TEST_CASE("a step decided non-finite as it ran (CPU, zero) stops the loop at once, not at the next read") {
  for (const auto& [name, devices, replicas] : {std::tuple{"one_device", "\"cpu:0\"", 1},
                                                {"zero", "\"cpu:0\", \"cpu:1\"", 2}}) {
    CAPTURE(name);
    const Recipe recipe = parse_recipe(loop_recipe(name, devices), "ledger.toml");
    auto strategy = make_strategy(recipe);
    strategy->model_state().initialize(recipe.seed);
    strategy->sync_replicas();
    LoopPlan plan;
    plan.batches_per_epoch = plan.total_steps = 20;
    DrawnBatches batches(replicas, 4, 20, 5);
    const LrSchedule schedule(recipe.optimizer.learning_rate, recipe.schedule, 4 * replicas, plan.total_steps);
    Recorder lazy(false);
    CHECK_THROWS_WITH_AS(StepLoop(*strategy, batches, plan, schedule, lazy).run(TrainState{}),
                         doctest::Contains("step 5: the gradients are not finite"), UserError);
    CHECK(lazy.steps == 4);
    CHECK(lazy.results.size() == 4);
  }
}

TEST_CASE("bench timing in windows: warm-up steps alone, then each window's steps share its mean time") {
  const Recipe recipe = parse_recipe(loop_recipe("one_device", "\"cpu:0\""), "ledger.toml");
  auto strategy = make_strategy(recipe);
  strategy->model_state().initialize(recipe.seed);
  DrawnBatches batches(1, 4, 1);
  batches.start(0, 0);
  const Batch batch = *batches.next();
  const std::vector<StepTime> times = time_steps(recipe, *strategy, batch, TimingPlan{3, 10, 4});
  REQUIRE(times.size() == 13);
  for (const auto& [first, last] : {std::pair{3, 6}, {7, 10}, {11, 12}}) {  // steps 4-7, 8-11, 12-13
    CAPTURE(first);
    for (int i = first; i <= last; ++i) CHECK(times[static_cast<size_t>(i)].ms == times[static_cast<size_t>(first)].ms);
    CHECK(times[static_cast<size_t>(first)].ms > 0);
  }
  CHECK(strategy->unread_steps() == 0);
  CHECK_THROWS_AS(time_steps(recipe, *strategy, batch, TimingPlan{0, 1, StepLedger::kCapacity + 1}), Error);
}

namespace {

// A run that diverges after its first epoch: the step named, and no checkpoint from it on.
void check_late_nonfinite(const std::string& strategy) {
  CAPTURE(strategy);
  const std::string dir = (fs::temp_directory_path() / "distrain_test_late_nonfinite").string();
  fs::remove_all(dir);
  // One sane epoch with checkpoints every 10 steps, then a learning rate that diverges
  // within a few dozen steps; progress off, so the figures are read only at checkpoints
  // and epoch ends.
  auto recipe = [&](double lr, int epochs) {
    return parse_recipe(fmt::format(R"(
name = "diverge"
[data]
dataset = "synthetic"
train_examples = 640
test_examples = 16
image_shape = [6, 6, 1]
[model]
input_shape = [6, 6, 1]
layers = [{{ type = "flatten" }}, {{ type = "dense", units = 32, activation = "relu" }}, {{ type = "dense", units = 10 }}]
[optimizer]
type = "sgd"
learning_rate = {}
[strategy]
{}
per_replica_batch = 8
[train]
epochs = {}
validate = false
tensorboard = false
[checkpoint]
every_steps = 10
keep = 100
)",
                                    lr, strategy, epochs),
                        dir + ".toml");
  };
  TrainOptions o;
  o.run_dir = dir;
  o.out = std::fopen("/dev/null", "w");
  o.progress.style = ProgressStyle::none;
  const int64_t sane = train(recipe(0.01, 1), o).steps;
  int64_t named = 0;
  try {
    train(recipe(1e30, 2), o);
    FAIL("a learning rate of 1e30 trained");
  } catch (const UserError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    REQUIRE(what.rfind("step ", 0) == 0);
    named = std::stoll(what.substr(5));
    CHECK(what.find("not finite") != std::string::npos);
  }
  CHECK(named > sane + 1);  // its first step has a finite loss (and an absurd update)
  // Every checkpoint before that step was written, none at or after it: the read before
  // the next checkpoint found it.
  int64_t checkpoints = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().extension() != ".h5") continue;
    ++checkpoints;
    CHECK(read_checkpoint_header(f.path().string()).state.step < named);
  }
  CHECK(checkpoints == (named - 1) / 10);
}

}  // namespace

TEST_CASE("a non-finite step found at a later read is named, and no checkpoint holds it or a step after it") {
  check_late_nonfinite("name = \"one_device\"\ndevices = [\"cpu:0\"]");
  check_late_nonfinite("name = \"mirrored\"\ndevices = [\"cpu:0\", \"cpu:1\"]");
}

TEST_CASE("cuda: a non-finite step found at a later read on the GPU is named, and never saved") {
  if (!have_gpu()) return;
  check_late_nonfinite("name = \"one_device\"\ndevices = [\"cuda:0\"]");
  check_late_nonfinite("name = \"mirrored\"\ndevices = [\"cuda:0\", \"cuda:0\"]");
}

}  // namespace distrain::test
