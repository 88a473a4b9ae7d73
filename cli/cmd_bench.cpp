// distrain bench RECIPE [--strategy NAME --replicas 1,2,4 [--mode weak|strong]]
//                       [--steps N] [--warmup N] [--json] [--csv FILE] [--svg FILE] [--profile]
// Training-step throughput (forward, backward, gradient reduction, update) on a fixed
// synthetic batch of the recipe's input shape, so figures do not depend on disk or data
// loading: the median step after warm-up (on a GPU, the median of 16-step windows' means, as
// the device runs ahead of the host between reads of the steps' figures). The steps are the Trainer's own (StepLoop, via
// time_steps in core/train/step_timing.hpp), so what bench times is what trains. With --replicas, one point per replica count
// and a scaling table; multi_worker_mirrored points are run by `mpirun -np N` of this
// executable. With --profile, one point's step per layer (core/train/step_profile.hpp).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/bench_load.hpp"
#include "cli/bench_steps.hpp"
#include "cli/scaling_chart.hpp"
#include "core/backend/backend.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/json.hpp"
#include "core/base/openmp_wait.hpp"
#include "core/base/log.hpp"
#include "core/base/rng.hpp"
#include "core/base/stop_signal.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/io/recipe.hpp"
#include "core/model/no_storage.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/data_placement.hpp"
#include "core/train/preflight.hpp"
#include "core/train/step_profile.hpp"
#include "core/train/step_timing.hpp"

namespace distrain::cli {

namespace {

constexpr int64_t kGpuReadEvery = 16;  // steps per window of GPU timing (TimingPlan::read_every)

struct Args {
  std::string recipe, strategy, replicas, mode = "weak", csv, svg;
  std::vector<std::string> overrides;
  int64_t steps = 50, warmup = 5;
  int busy = 0;        // --busy: load processes beside the measured point
  int64_t rounds = 3;  // --busy: quiet and busy measurements, interleaved
  int64_t read_every = 0;  // 0: kGpuReadEvery on a GPU, 1 on the CPU
  bool json = false;
  bool profile = false;
  bool alone = false;  // a one-process strategy in a launched job (make_strategy's alone_in_job)
  bool reference_bandwidth = true;  // the update's figures with an axpby pass beside them (plan's steps skip it)
};

struct Measured {
  MemoryUse memory;  // per replica
  int64_t device_peak = 0;  // the high-water mark of replica 0's device (DeviceMemory)
  std::string device;
  std::vector<std::pair<int64_t, int64_t>> replica_memory;  // per replica of the job: measured peak, predicted
  std::string strategy;
  int replicas = 1, threads = 1;
  int64_t global_batch = 0, steps = 0, read_every = 1;
  int64_t tokens_per_example = 1;  // a language model's window: its rate is also in tokens
  double images_per_sec = 0, min_ms = 0, median_ms = 0, max_ms = 0, comm_share = 0;
  // Adam's update: the median time, the parameters this process updates, where (device or
  // host), and the memory bandwidth an axpby reached in the same run, for comparison.
  double update_ms = 0, reference_gbps = 0;
  int64_t updated = 0;
  std::string update_place;
  // Bytes this rank's collectives sent per step (CommTraffic), and theory's figure.
  double data_bytes = 0, data_collectives = 0, tensor_bytes = 0, tensor_collectives = 0;
  TrafficTheory theory;
  // Pipeline stages: the median idle share per stage, theory's, activations held per stage.
  std::vector<double> stage_idle;
  std::vector<int64_t> stage_activations;
  double idle_theory = 0;
  std::string pipeline;  // "P stages, M micro-batches, schedule S"
  std::optional<StepProfile> profile;  // with --profile
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

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
    m.stage_idle.push_back(median(idle));
    m.stage_activations.push_back(times.back().stages[st].activation_bytes);
  }
  m.data_bytes = median(data_bytes);
  m.data_collectives = median(data_collectives);
  m.tensor_bytes = median(tensor_bytes);
  m.tensor_collectives = median(tensor_collectives);
  m.steps = static_cast<int64_t>(ms.size());
  m.median_ms = median(ms);
  m.min_ms = *std::min_element(ms.begin(), ms.end());
  m.max_ms = *std::max_element(ms.begin(), ms.end());
  m.images_per_sec = static_cast<double>(m.global_batch) / (m.median_ms / 1000.0);
  m.comm_share = median(reduce_ms) / m.median_ms;
  m.update_ms = median(update_ms);
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

// One point, in this process (and its MPI peers when launched so): the Trainer's own step
// loop on a synthetic batch.
Measured measure(const Recipe& recipe, const Args& a, int& rank) {
  check_zero_fits_host(recipe);
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
  if (s.mesh_pipeline > 1)
    m.pipeline = fmt::format("{} stages, {} micro-batch(es), schedule {}", s.mesh_pipeline, s.micro_batches, s.schedule);
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

}  // namespace

StepProfile profile_on_one_device(const Recipe& recipe, int64_t steps, int64_t warmup) {
  Args a;
  a.profile = true;
  a.alone = true;
  a.reference_bandwidth = false;
  a.steps = steps;
  a.warmup = warmup;
  int rank = 0;
  return *measure(recipe, a, rank).profile;
}

double median_step_ms_in_job(const Recipe& recipe, int64_t steps, int64_t warmup) {
  Args a;
  a.reference_bandwidth = false;
  a.steps = steps;
  a.warmup = warmup;
  int rank = 0;
  return measure(recipe, a, rank).median_ms;
}

namespace {

Json to_json(const Measured& m, const std::string& recipe_name) {
  return {{"recipe", recipe_name},
          {"strategy", m.strategy},
          {"replicas", m.replicas},
          {"global_batch", m.global_batch},
          {"threads", m.threads},
          {"images_per_sec", m.images_per_sec},
          {"tokens_per_example", m.tokens_per_example},
          {"step_ms", {{"min", m.min_ms}, {"median", m.median_ms}, {"max", m.max_ms}}},
          {"comm_share", m.comm_share},
          {"steps", m.steps},
          {"read_every", m.read_every},
          {"sent_per_step",
           {{"data_bytes", m.data_bytes},
            {"data_collectives", m.data_collectives},
            {"tensor_bytes", m.tensor_bytes},
            {"tensor_collectives", m.tensor_collectives},
            {"theory", m.theory.formula},
            {"theory_bytes", m.theory.bytes}}},
          {"pipeline",
           {{"layout", m.pipeline},
            {"idle_per_stage", m.stage_idle},
            {"idle_theory", m.idle_theory},
            {"activation_bytes_per_stage", m.stage_activations}}},
          {"memory_per_replica",
           {{"parameters", m.memory.parameters},
            {"gradients", m.memory.gradients},
            {"optimizer", m.memory.optimizer},
            {"activations", m.memory.activations}}},
          {"device_memory_peak", {{"device", m.device}, {"bytes", m.device_peak}}},
          {"device_memory_per_replica", m.replica_memory},
          {"update", {{"ms", m.update_ms}, {"parameters", m.updated}, {"place", m.update_place},
                      {"reference_gb_per_s", m.reference_gbps}}}};
}

// The inverse of to_json; throws Json::exception when a key is missing or of another type.
Measured measured_from_json(const Json& j) {
  Measured m;
  m.strategy = j.at("strategy").get<std::string>();
  m.replicas = j.at("replicas").get<int>();
  m.global_batch = j.at("global_batch").get<int64_t>();
  m.threads = j.at("threads").get<int>();
  m.images_per_sec = j.at("images_per_sec").get<double>();
  m.tokens_per_example = j.value("tokens_per_example", int64_t{1});  // absent: an image model
  m.min_ms = j.at("step_ms").at("min").get<double>();
  m.median_ms = j.at("step_ms").at("median").get<double>();
  m.max_ms = j.at("step_ms").at("max").get<double>();
  m.comm_share = j.at("comm_share").get<double>();
  m.steps = j.at("steps").get<int64_t>();
  m.read_every = j.at("read_every").get<int64_t>();
  const Json& sent = j.at("sent_per_step");
  m.data_bytes = sent.at("data_bytes").get<double>();
  m.data_collectives = sent.at("data_collectives").get<double>();
  m.tensor_bytes = sent.at("tensor_bytes").get<double>();
  m.tensor_collectives = sent.value("tensor_collectives", 0.0);  // absent from older bench JSON
  m.theory = {sent.at("theory").get<std::string>(), sent.at("theory_bytes").get<double>()};
  if (const auto p = j.find("pipeline"); p != j.end()) {
    m.pipeline = p->at("layout").get<std::string>();
    m.stage_idle = p->at("idle_per_stage").get<std::vector<double>>();
    m.idle_theory = p->at("idle_theory").get<double>();
    m.stage_activations = p->at("activation_bytes_per_stage").get<std::vector<int64_t>>();
  }
  const Json& mem = j.at("memory_per_replica");
  m.memory = {mem.at("parameters").get<int64_t>(), mem.at("gradients").get<int64_t>(), mem.at("optimizer").get<int64_t>(),
              mem.at("activations").get<int64_t>()};
  const Json& peak = j.at("device_memory_peak");
  m.device = peak.at("device").get<std::string>();
  m.device_peak = peak.at("bytes").get<int64_t>();
  if (const auto r = j.find("device_memory_per_replica"); r != j.end())
    m.replica_memory = r->get<std::vector<std::pair<int64_t, int64_t>>>();
  if (const auto u = j.find("update"); u != j.end()) {
    m.update_ms = u->at("ms").get<double>();
    m.updated = u->at("parameters").get<int64_t>();
    m.update_place = u->at("place").get<std::string>();
    m.reference_gbps = u->at("reference_gb_per_s").get<double>();
  }
  return m;
}

// Each replica's (rank's) device: measured peak / predicted, in MiB, and the ratio.
void print_replica_memory(const std::vector<std::pair<int64_t, int64_t>>& figures) {
  std::string line;
  for (size_t r = 0; r < figures.size(); ++r) {
    const auto [measured, predicted] = figures[r];
    line += fmt::format("{}{}: {:.1f}/{:.1f} ({:.2f}x)", r ? ", " : "", r, static_cast<double>(measured) / (1 << 20),
                        static_cast<double>(predicted) / (1 << 20),
                        predicted > 0 ? static_cast<double>(measured) / static_cast<double>(predicted) : 0.0);
  }
  fmt::print("  device memory per replica, measured peak/predicted MiB: {}\n", line);
}

// The line of a child's output that best says what went wrong: the first naming an error,
// else the last one, so that our own error message stays on one line.
std::string telling_line(const std::string& out) {
  std::istringstream lines(out);
  std::string last = "(no output)";
  for (std::string line; std::getline(lines, line);) {
    if (line.find("error") != std::string::npos) return line.substr(0, 300);
    if (!line.empty()) last = line;
  }
  return last.substr(0, 300);
}

// The result object among the lines `mpirun -np n` printed; its own notices and the ranks'
// logs are not JSON and are skipped.
Json child_result(const std::string& out, int n) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) return j;
  }
  throw UserError(fmt::format("bench: `mpirun -np {}` printed no JSON result: {}", n, telling_line(out)));
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A multi_worker_mirrored point: this executable under `mpirun -np n`, one point, JSON.
Measured measure_with_mpirun(const Args& a, const std::vector<std::string>& overrides, int n) {
  const int threads = std::max(1, cpu_threads() / n);
  std::string cmd = fmt::format("OMP_NUM_THREADS={} mpirun {}--oversubscribe --bind-to none -np {} {} bench {}", threads,
                                ::geteuid() == 0 ? "--allow-run-as-root " : "", n, shell_quote(self_path()), shell_quote(a.recipe));
  for (const auto& o : overrides) cmd += " --set " + shell_quote(o);
  cmd += fmt::format(" --steps {} --warmup {}", a.steps, a.warmup);
  if (a.read_every) cmd += fmt::format(" --read-every {}", a.read_every);
  cmd += " --json 2>&1";
  std::FILE* p = nullptr;
  {
    const StopSignalsUnblocked for_the_child;  // mpirun and its ranks must stop on SIGTERM and Ctrl-C
    p = ::popen(cmd.c_str(), "r");
  }
  DT_CHECK(p, "cannot run {}", cmd);
  std::string out;
  char buf[4096];
  while (size_t k = std::fread(buf, 1, sizeof buf, p)) out.append(buf, k);
  const int rc = ::pclose(p);
  DT_USER_CHECK(rc == 0, "bench: `mpirun -np {}` failed (is openmpi-bin installed?): {}", n, telling_line(out));
  try {
    return measured_from_json(child_result(out, n));
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("bench: the result of `mpirun -np {}` is incomplete: {}", n, e.what()));
  }
}

std::vector<int> parse_counts(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    DT_USER_CHECK(!item.empty() && *end == 0 && v > 0 && v <= 1024, "--replicas: '{}' is not a positive count (e.g. 1,2,4)", item);
    out.push_back(static_cast<int>(v));
  }
  DT_USER_CHECK(!out.empty(), "--replicas: give counts such as 1,2,4");
  return out;
}

// The recipe of one point: the strategy, `n` replicas (devices) and their batch, under
// --mode strong a share of the first point's global batch.
std::vector<std::string> point_overrides(const Args& a, const std::string& name, int64_t base_batch, int first, int n) {
  std::vector<std::string> o = a.overrides;
  o.push_back("strategy.name=" + name);
  int64_t per_replica = base_batch;
  if (a.mode == "strong") {
    const int64_t global = base_batch * first;
    DT_USER_CHECK(global % n == 0, "--mode strong: global batch {} does not split over {} replicas", global, n);
    per_replica = global / n;
  }
  o.push_back(fmt::format("strategy.per_replica_batch={}", per_replica));
  if (name == "multi_worker_mirrored") {
    o.push_back("strategy.devices=[\"cpu:0\"]");  // one replica per process, n processes
    return o;
  }
  DT_USER_CHECK(name != "one_device" || n == 1, "--strategy one_device has exactly 1 replica; use mirrored for more");
  std::string devices;
  for (int i = 0; i < n; ++i) devices += fmt::format("{}\"cpu:{}\"", i ? "," : "", i);
  o.push_back("strategy.devices=[" + devices + "]");
  return o;
}

// One point per replica count, each measured --rounds times with the points in turns (a
// machine that changes pace meanwhile moves every point alike): the median round, its range;
// speed-up and efficiency against the first.
std::vector<ScalingPoint> scaling_points(const Args& a, const std::string& name, int64_t base_batch,
                                         const std::vector<int>& counts) {
  std::vector<std::vector<Measured>> rounds(counts.size());
  for (int64_t r = 0; r < a.rounds; ++r)
    for (size_t i = 0; i < counts.size(); ++i) {
      const int n = counts[i];
      const std::vector<std::string> o = point_overrides(a, name, base_batch, counts.front(), n);
      int rank = 0;
      rounds[i].push_back(name == "multi_worker_mirrored" ? measure_with_mpirun(a, o, n)
                                                          : measure(load_recipe(a.recipe, o), a, rank));
    }
  std::vector<ScalingPoint> points;
  for (size_t i = 0; i < counts.size(); ++i) {
    std::vector<Measured>& ms = rounds[i];
    std::sort(ms.begin(), ms.end(), [](const Measured& x, const Measured& y) { return x.images_per_sec < y.images_per_sec; });
    const Measured& m = ms[(ms.size() - 1) / 2];
    ScalingPoint p{counts[i], m.global_batch, m.images_per_sec, 0, 0, m.median_ms, m.comm_share};
    p.min_images_per_sec = ms.front().images_per_sec;
    p.max_images_per_sec = ms.back().images_per_sec;
    p.rounds = static_cast<int>(ms.size());
    points.push_back(p);
  }
  compare_to_first(points);
  return points;
}

void print_scaling_json(const std::vector<ScalingPoint>& points, const std::string& name, const std::string& mode) {
  Json list = Json::array();
  for (const auto& p : points)
    list.push_back({{"strategy", name},
                    {"mode", mode},
                    {"replicas", p.replicas},
                    {"global_batch", p.global_batch},
                    {"images_per_sec", p.images_per_sec},
                    {"speedup", p.speedup},
                    {"efficiency", p.efficiency},
                    {"step_ms", p.step_ms},
                    {"comm_share", p.comm_share},
                    {"rounds", p.rounds},
                    {"min_images_per_sec", p.min_images_per_sec},
                    {"max_images_per_sec", p.max_images_per_sec},
                    {"within_noise", p.within_noise}});
  fmt::print("{}\n", dump_line(list));
}

void print_scaling_table(const std::vector<ScalingPoint>& points, const Args& a, const std::string& recipe_name,
                         const std::string& name) {
  fmt::print("{} scaling of {} ({}), {} timed steps after {} warm-up, {} CPU threads in all; each point the median of {} "
             "round(s), the points in turns\n",
             a.mode, recipe_name, name, a.steps, a.warmup, cpu_threads(), a.rounds);
  fmt::print("{:>8} {:>12} {:>12} {:>8} {:>9} {:>11} {:>10} {:>7}\n", "replicas", "global batch", "images/s", "spread",
             "speed-up", "efficiency", "step ms", "comm");
  bool noisy = false;
  for (const auto& p : points) {
    noisy = noisy || p.within_noise;
    fmt::print("{:>8} {:>12} {:>12.0f} {:>7.1f}% {:>8.2f}x {:>10.1f}%{} {:>9.2f} {:>6.1f}%\n", p.replicas, p.global_batch,
               p.images_per_sec, 100 * p.spread(), p.speedup, 100 * p.efficiency, p.within_noise ? "~" : " ", p.step_ms,
               100 * p.comm_share);
  }
  if (noisy)
    fmt::print("~: the efficiency's distance from 100% is smaller than the spread of the rounds (this point's and the first's): "
               "not told apart from perfect scaling; more --rounds or --steps, or a quieter machine, may\n");
}

void write_scaling_csv(const std::string& path, const std::vector<ScalingPoint>& points, const std::string& name,
                       const std::string& mode) {
  std::ofstream f(path);
  DT_USER_CHECK(f, "--csv {}: cannot write", path);
  f << "strategy,mode,replicas,global_batch,images_per_sec,speedup,efficiency,step_ms,comm_share,rounds,min_images_per_sec,"
       "max_images_per_sec,within_noise\n";
  for (const auto& p : points)
    f << fmt::format("{},{},{},{},{:.1f},{:.4f},{:.4f},{:.3f},{:.4f},{},{:.1f},{:.1f},{}\n", name, mode, p.replicas, p.global_batch,
                     p.images_per_sec, p.speedup, p.efficiency, p.step_ms, p.comm_share, p.rounds, p.min_images_per_sec,
                     p.max_images_per_sec, p.within_noise);
}

void write_scaling_svg(const std::string& path, const std::vector<ScalingPoint>& points, const std::string& title) {
  std::ofstream f(path);
  DT_USER_CHECK(f, "--svg {}: cannot write", path);
  f << scaling_svg(title, points);
}

void scaling(const Args& a) {
  const Recipe base = load_recipe(a.recipe, a.overrides);
  const std::string name = a.strategy.empty() ? base.strategy.name : a.strategy;
  const std::vector<int> counts = parse_counts(a.replicas.empty() ? "1" : a.replicas);
  const std::vector<ScalingPoint> points = scaling_points(a, name, base.strategy.per_replica_batch, counts);
  if (a.json)
    print_scaling_json(points, name, a.mode);
  else
    print_scaling_table(points, a, base.name, name);
  if (!a.csv.empty()) write_scaling_csv(a.csv, points, name, a.mode);
  if (!a.svg.empty()) write_scaling_svg(a.svg, points, fmt::format("{}: {} scaling, {}", base.name, a.mode, name));
}

// Bytes per step and rank beside theory's, G the gradient bytes a replica reduces (N-1)/N
// of which each rank sends in a ring.
void print_sent(const Measured& m) {
  std::string line = fmt::format("  sent per step per rank: {:.0f} B in {:.0f} collectives among replicas", m.data_bytes,
                                 m.data_collectives);
  if (!m.theory.formula.empty())
    line += fmt::format(" (theory {} = {:.0f} B, measured/theory {:.3f})", m.theory.formula, m.theory.bytes,
                        m.theory.bytes > 0 ? m.data_bytes / m.theory.bytes : 0.0);
  if (m.tensor_bytes > 0)
    line += fmt::format("; {:.0f} B in {:.0f} collectives along the tensor axis", m.tensor_bytes, m.tensor_collectives);
  fmt::print("{}\n", line);
}

// The bubble: each stage's idle share of the step (median) beside theory's (P-1)/(M+P-1),
// which assumes stages of equal cost; and the activations each stage holds at once.
void print_stages(const Measured& m) {
  std::string idle, bytes;
  for (size_t st = 0; st < m.stage_idle.size(); ++st) {
    idle += fmt::format(" {:.3f}", m.stage_idle[st]);
    bytes += fmt::format(" {}", m.stage_activations[st]);
  }
  fmt::print("  pipeline, {}: idle share per stage{} (theory {:.3f}); activation bytes per stage{}\n", m.pipeline, idle,
             m.idle_theory, bytes);
}

// One point, as worker 0 reports it: a JSON object, or three to five lines.
void print_point(const Measured& m, const std::string& recipe_name, int64_t warmup, bool json) {
  if (json) {
    Json j = to_json(m, recipe_name);
    if (m.profile) j["profile"] = profile_json(*m.profile);
    if (m.profile && !m.profile->not_profiled.empty()) j["profile_note"] = m.profile->not_profiled;
    fmt::print("{}\n", dump_line(j));
    return;
  }
  fmt::print("{}: {} replica(s) of {}, global batch {}, {} timed steps after {} warm-up{}\n", recipe_name, m.replicas,
             m.strategy, m.global_batch, m.steps, warmup,
             m.read_every > 1 ? fmt::format(", figures read every {} steps", m.read_every) : "");
  // One replica reduces nothing: no reduction share to show.
  const bool reduces = m.replicas > 1 || m.data_bytes > 0 || m.tensor_bytes > 0;
  const std::string rate = m.tokens_per_example > 1
                               ? fmt::format("{:.0f} tokens/s ({:.1f} sequences/s)",
                                             m.images_per_sec * static_cast<double>(m.tokens_per_example), m.images_per_sec)
                               : fmt::format("{:.0f} images/s", m.images_per_sec);
  fmt::print("  {}   step ms: min {:.2f}  median {:.2f}  max {:.2f}{}\n", rate, m.min_ms, m.median_ms, m.max_ms,
             reduces ? fmt::format("   gradient reduction {:.1f}%", 100 * m.comm_share) : "");
  fmt::print("  per replica: parameters {} B, gradients {} B, optimizer {} B, activations {} B\n", m.memory.parameters,
             m.memory.gradients, m.memory.optimizer, m.memory.activations);
  const int64_t predicted = m.memory.device_total();
  fmt::print("  device memory on {}: measured peak {} B, predicted {} B ({:.2f}x)\n", m.device, m.device_peak, predicted,
             predicted > 0 ? static_cast<double>(m.device_peak) / static_cast<double>(predicted) : 0.0);
  if (m.replica_memory.size() > 1) print_replica_memory(m.replica_memory);
  if (m.updated > 0 && m.update_ms > 0) {
    const double gbps = 28.0 * static_cast<double>(m.updated) / (m.update_ms / 1000.0) / 1e9;
    fmt::print("  optimizer update {}: {} parameters in {:.2f} ms = {:.1f} GB/s at 28 B each; memory bandwidth now (axpby) "
               "{:.1f} GB/s: {:.0f}% of it\n",
               m.update_place, m.updated, m.update_ms, gbps, m.reference_gbps, 100.0 * gbps / m.reference_gbps);
  }
  if (m.data_bytes > 0 || m.tensor_bytes > 0) print_sent(m);
  if (!m.stage_idle.empty()) print_stages(m);
  if (m.profile) fmt::print("{}", profile_table(*m.profile));
}

// The rate a point reports: tokens/s for a language model, else examples/s.
double rate_of(const Measured& m) { return m.images_per_sec * static_cast<double>(m.tokens_per_example); }

std::string rounds_text(const std::vector<double>& v) {
  std::string out;
  for (const double x : v) out += fmt::format(" {:.0f}", x);
  return out;
}

// --busy N: the point measured quiet and beside N load processes (BenchLoad), in turns, so
// that a machine that changes pace meanwhile slows both alike.
void quiet_and_busy(const Args& a) {
  const Recipe recipe = load_recipe(a.recipe, a.overrides);
  std::vector<std::string> load_args{"bench", a.recipe, "--steps", "1000000", "--warmup", "0"};
  for (const std::string& o : a.overrides) load_args.insert(load_args.end(), {"--set", o});
  BenchLoad load(a.busy, load_args);
  std::vector<double> quiet, busy;
  Measured last;
  int rank = 0;
  for (int64_t r = 0; r < a.rounds; ++r) {
    quiet.push_back(rate_of(measure(recipe, a, rank)));
    load.start();
    last = measure(recipe, a, rank);
    busy.push_back(rate_of(last));
    load.stop();
  }
  const double q = median(quiet), b = median(busy);
  const std::string unit = last.tokens_per_example > 1 ? "tokens/s" : "images/s";
  if (a.json) {
    fmt::print("{}\n", dump_line(Json{{"recipe", recipe.name}, {"unit", unit}, {"busy_processes", a.busy},
                                      {"threads", last.threads}, {"openmp_wait", openmp_wait_description()},
                                      {"quiet", q}, {"busy", b}, {"kept", b / q}, {"quiet_rounds", quiet}, {"busy_rounds", busy}}));
    return;
  }
  fmt::print("{}: {} thread(s), quiet and beside {} busy process(es) (each this recipe's bench), {} rounds in turns, "
             "{} timed steps after {} warm-up; OpenMP: {}\n",
             recipe.name, last.threads, a.busy, a.rounds, a.steps, a.warmup, openmp_wait_description());
  fmt::print("  quiet  {:>10.0f} {}   rounds:{}\n", q, unit, rounds_text(quiet));
  fmt::print("  busy   {:>10.0f} {}   rounds:{}   {:.0f}% of quiet (a fair share of {} core(s) among {} jobs: {:.0f}%)\n", b,
             unit, rounds_text(busy), 100 * b / q, cpu_cores(), a.busy + 1, 100.0 / (a.busy + 1));
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure training-step throughput; with --replicas, a scaling curve");
  auto a = std::make_shared<Args>();
  cmd->add_option("recipe", a->recipe, "Recipe file (TOML)")->required();
  cmd->add_option("--set", a->overrides, "Override a recipe key (repeatable)");
  cmd->add_option("--strategy", a->strategy, "Strategy for the scaling curve (default: the recipe's)");
  cmd->add_option("--replicas", a->replicas, "Replica counts, e.g. 1,2,4 (one point each)");
  cmd->add_option("--mode", a->mode, "weak: per-replica batch fixed; strong: global batch fixed")
      ->check(CLI::IsMember({"weak", "strong"}))
      ->capture_default_str();
  cmd->add_option("--steps", a->steps, "Timed steps")->capture_default_str()->check(at_least(1));
  cmd->add_option("--warmup", a->warmup, "Untimed steps first")->capture_default_str()->check(at_least(0));
  cmd->add_option("--read-every", a->read_every,
                  "Read the steps' figures every N timed steps, each step of the N timed at their mean "
                  "(default: 16 on a GPU, which runs ahead of the host meanwhile, as in training; 1 on the CPU)")
      ->check(CLI::Range(int64_t{1}, StepLedger::kCapacity));
  cmd->add_flag("--json", a->json, "Print JSON: one object, or a list of points with --replicas");
  cmd->add_option("--csv", a->csv, "Write the scaling points as CSV");
  cmd->add_option("--svg", a->svg, "Draw images/s and efficiency against replicas");
  cmd->add_flag("--profile", a->profile, "Per-layer forward and backward time of one point's step (CPU devices)");
  cmd->add_option("--busy", a->busy, "Also measure beside N busy processes (this recipe's bench), quiet and busy in turns")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--rounds", a->rounds, "Measurements of each scaling point (in turns) or, with --busy, of quiet and busy; "
                  "medians reported")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100}));
  cmd->callback([a] {
    if (a->json) log::set_info_stream(stderr);
    DT_USER_CHECK(!a->profile || (a->replicas.empty() && a->strategy.empty() && a->csv.empty() && a->svg.empty()),
                  "bench --profile times one point: drop --strategy, --replicas, --csv and --svg "
                  "(choose the strategy with --set strategy.name=...)");
    DT_USER_CHECK(!a->busy || (a->replicas.empty() && a->strategy.empty() && !a->profile && launcher_size() <= 1),
                  "bench --busy measures one point in one process: drop --replicas, --strategy and --profile, and mpirun");
    if (a->busy) return quiet_and_busy(*a);
    if (!a->replicas.empty() || !a->strategy.empty() || !a->csv.empty() || !a->svg.empty()) {
      scaling(*a);
      return;
    }
    const Recipe recipe = load_recipe(a->recipe, a->overrides);
    int rank = 0;
    const Measured m = measure(recipe, *a, rank);
    if (rank == 0) print_point(m, recipe.name, a->warmup, a->json);  // under mpirun, worker 0 reports
  });
}

}  // namespace distrain::cli
