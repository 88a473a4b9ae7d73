#include "core/train/bench_measure.hpp"

#include <algorithm>
#include <chrono>

#include "core/backend/backend.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/rng.hpp"
#include "core/model/no_storage.hpp"
#include "core/train/data_placement.hpp"
#include "core/train/preflight.hpp"
#include "core/train/step_timing.hpp"

namespace distrain {

double median_value(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

namespace {

constexpr int64_t kGpuReadEvery = 16;  // steps per window of GPU timing (TimingPlan::read_every)


// Random pixel values and labels of the recipe's shapes, a batch for each of this
// process's replicas, drawn from the seed and the rank; for a language model, a random
// token stream of a window per example.
Dataset synthetic_examples(const Recipe& recipe, const Strategy& strategy) {
  const Model model(recipe.model(), backend_for(Device{}), storage_free_seams());  // whole: a stage's is a part
  const int64_t per = model.input_shape().numel(), count = recipe.step_batch();
  const Shape& out = model.output_shape();
  const auto classes = static_cast<uint64_t>(out[out.rank() - 1]);
  Dataset data{"synthetic", model.input_shape(), static_cast<int64_t>(classes), {}, {}, {}};
  Rng rng(derive_seed(recipe.seed, static_cast<uint64_t>(strategy.rank())));
  if (model.input_dtype() == DType::i32) {
    data.window = per;
    for (int64_t i = 0; i < strategy.local_replicas() * count * per + 1; ++i)
      data.tokens.push_back(static_cast<int32_t>(rng.below(classes)));
    return data;
  }
  for (int r = 0; r < strategy.local_replicas(); ++r) {
    for (int64_t i = 0; i < count * per; ++i) data.pixels.push_back(static_cast<uint8_t>(rng.below(256)));
    for (int64_t i = 0; i < count; ++i) data.labels.push_back(static_cast<int32_t>(rng.below(classes)));
  }
  return data;
}

// Replica r's slice is examples [r x batch, (r + 1) x batch) of `data`: their indices when
// the data are on the devices (as `train` gives them), else their values; token data's
// example i is window i and the tokens one further on.
Batch synthetic_batch(const Recipe& recipe, const Strategy& strategy, const Dataset& data, bool indices) {
  const int64_t per = data.example_shape.numel(), count = recipe.step_batch();
  Batch batch;
  batch.global_count = count * strategy.num_replicas();
  batch.labels_per_example = data.token_data() ? per : 1;
  for (int r = 0; r < strategy.local_replicas(); ++r) {
    ReplicaSlice s;
    s.count = count;
    for (int64_t i = r * count; i < (r + 1) * count; ++i) {
      if (data.token_data()) {
        const auto first = data.tokens.begin() + i * per;
        s.tokens.insert(s.tokens.end(), first, first + per);
        s.labels.insert(s.labels.end(), first + 1, first + per + 1);
        continue;
      }
      if (indices) s.indices.push_back(static_cast<int32_t>(i));
      else s.images.insert(s.images.end(), data.pixels.begin() + i * per, data.pixels.begin() + (i + 1) * per);
      s.labels.push_back(data.labels[static_cast<size_t>(i)]);
    }
    batch.replicas.push_back(std::move(s));
  }
  return batch;
}

// The figures of the timed steps (those after the warm-up).
void take_figures(const std::vector<StepTime>& times, int64_t warmup, Measured& m) {
  std::vector<double> ms, reduce_ms, update_ms, data_bytes, data_collectives, tensor_bytes, tensor_collectives;
  for (size_t i = static_cast<size_t>(warmup); i < times.size(); ++i) {
    ms.push_back(times[i].ms);
    reduce_ms.push_back(times[i].reduce_ms);
    update_ms.push_back(times[i].update_ms);
    data_bytes.push_back(times[i].data.bytes);
    data_collectives.push_back(static_cast<double>(times[i].data.collectives));
    tensor_bytes.push_back(times[i].tensor.bytes);
    tensor_collectives.push_back(static_cast<double>(times[i].tensor.collectives));
  }
  for (size_t st = 0; !times.empty() && st < times.back().stages.size(); ++st) {
    std::vector<double> idle;
    for (size_t i = static_cast<size_t>(warmup); i < times.size(); ++i) idle.push_back(times[i].stages[st].idle);
    m.stage_idle.push_back(median_value(idle));
    m.stage_activations.push_back(times.back().stages[st].activation_bytes);
  }
  m.data_bytes = median_value(data_bytes);
  m.data_collectives = median_value(data_collectives);
  m.tensor_bytes = median_value(tensor_bytes);
  m.tensor_collectives = median_value(tensor_collectives);
  m.steps = static_cast<int64_t>(ms.size());
  m.median_ms = median_value(ms);
  m.min_ms = *std::min_element(ms.begin(), ms.end());
  m.max_ms = *std::max_element(ms.begin(), ms.end());
  m.images_per_sec = static_cast<double>(m.global_batch) / (m.median_ms / 1000.0);
  m.comm_share = median_value(reduce_ms) / m.median_ms;
  m.update_ms = median_value(update_ms);
}

// This machine's memory bandwidth now, as a reference for the update's: the best of 5
// axpby passes (y = x + y, 12 bytes per element) over 512 MiB of host memory, far beyond
// the caches, streamed as Adam's update streams (tiles on the threads, AVX-512 or AVX2).
double axpby_bandwidth() {
  Backend& host = host_backend();
  const int64_t n = int64_t{1} << 26;
  Buffer x(host, Shape{n}), y(host, Shape{n});
  host.fill(x.view(), 1.0f);
  host.fill(y.view(), 0.0f);
  double best = 0;
  for (int k = 0; k < 5; ++k) {
    const auto start = std::chrono::steady_clock::now();
    host.axpby(1.0f, x.view(), 1.0f, y.view());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 12.0 * static_cast<double>(n) / s / 1e9);
  }
  return best;
}

// Adam's update figures: its parameters (a moment's elements per local replica) and place.
void take_update_figures(Strategy& strategy, bool reference_bandwidth, Measured& m) {
  const std::string type = strategy.optimizer().type();
  if (type != "adam" && type != "adamw") return;
  const Tensor moment = strategy.optimizer().slot("m");
  m.updated = moment.numel() * strategy.local_replicas();
  m.update_place = moment.device == Device::host() ? "in host memory" : "on the device";
  if (reference_bandwidth) m.reference_gbps = axpby_bandwidth();
}

}  // namespace

// One point, in this process (and its MPI peers when launched so): the Trainer's own step
// loop on a synthetic batch.
Measured measure_steps(const Recipe& recipe, const MeasureOptions& a, int& rank) {
  check_replicas_fit_host(recipe);
  const std::optional<int64_t> host_available = available_host_memory();
  auto strategy = make_strategy(recipe, a.alone);
  check_memory_fits(recipe, *strategy, host_available);
  rank = strategy->serves() ? -1 : strategy->rank();  // a server reports nothing
  if (strategy->serves()) {  // a parameter server's server: serve the workers' steps
    strategy->serve("", "", recipe.seed);
    return Measured{};
  }
  strategy->model_state().initialize(recipe.seed);
  strategy->sync_replicas();
  const Dataset examples = synthetic_examples(recipe, *strategy);
  const bool on_devices = place_data_on_devices(recipe, *strategy, examples, DataUse::training);
  const Batch batch = synthetic_batch(recipe, *strategy, examples, on_devices);
  Measured m;
  m.memory = strategy->memory_per_replica(recipe.strategy.per_replica_batch);
  m.strategy = strategy->name();
  m.replicas = strategy->num_replicas();
  m.threads = cpu_threads();
  m.global_batch = batch.global_count;
  m.tokens_per_example = batch.labels_per_example;
  m.theory = strategy->traffic_theory();
  m.idle_theory = strategy->stage_idle_theory();
  const StrategySpec& s = recipe.strategy;
  if (s.mesh.pipeline > 1)
    m.pipeline = fmt::format("{} stages, {} micro-batch(es), schedule {}", s.mesh.pipeline, s.mesh.micro_batches, s.mesh.schedule);
  Backend& first_device = strategy->model().params().backend();
  LayerClock clock(strategy->model().layers().size(), [&first_device] { first_device.synchronize(); });
  const bool timed = a.profile && why_not_profiled(*strategy).empty();
  // A GPU runs ahead of the host as in training (figures read every kGpuReadEvery steps);
  // a CPU step is done when its calls return, so each is timed alone. A profile syncs anyway.
  m.read_every = a.read_every ? a.read_every : timed || first_device.device().is_cpu() ? 1 : kGpuReadEvery;
  const std::vector<StepTime> times =
      time_steps(recipe, *strategy, batch, TimingPlan{a.warmup, a.steps, m.read_every}, timed ? &clock : nullptr);
  take_figures(times, a.warmup, m);
  m.device = first_device.device().str();
  m.device_peak = first_device.memory().peak();
  m.replica_memory = strategy->device_memory_over_job(recipe.strategy.per_replica_batch);
  take_update_figures(*strategy, a.reference_bandwidth, m);
  if (a.profile) m.profile = profile_steps(*strategy, times, a.warmup);
  return m;
}

StepProfile profile_on_one_device(const Recipe& recipe, int64_t steps, int64_t warmup) {
  MeasureOptions a;
  a.profile = true;
  a.alone = true;
  a.reference_bandwidth = false;
  a.steps = steps;
  a.warmup = warmup;
  int rank = 0;
  return *measure_steps(recipe, a, rank).profile;
}

double median_step_ms_in_job(const Recipe& recipe, int64_t steps, int64_t warmup) {
  MeasureOptions a;
  a.reference_bandwidth = false;
  a.steps = steps;
  a.warmup = warmup;
  int rank = 0;
  return measure_steps(recipe, a, rank).median_ms;
}

}  // namespace distrain
