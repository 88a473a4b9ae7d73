// plan's measurements on this machine: profiles of the layers' times and, with --measure,
// the calibration steps of every rank.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "cli/plan_args.hpp"
#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/log.hpp"
#include "core/train/bench_measure.hpp"

namespace distrain::cli {

namespace {

// The profile of `base` cut to its first blocks (profile_recipe), each layer of the whole
// model timed as its stand-in; the update and the rest of the step (zeroing gradients and
// checking them dominate it in a large model) scaled from the profiled model's values to
// the whole one's.
LayerTimes layer_times(const Recipe& base, int64_t batch, bool bf16, int64_t steps, int threads, int64_t value_bytes) {
  const Recipe profiled = profile_recipe(base, batch, bf16, threads);
  const StepProfile p = profile_on_one_device(profiled, steps, 2);
  const double scale = static_cast<double>(value_bytes) / static_cast<double>(model_value_bytes(profiled, batch));
  std::map<std::string, std::pair<double, double>> measured;
  LayerTimes t;
  t.value_bytes = value_bytes;
  for (const ProfileRow& r : p.rows) {
    if (r.name == "(update)") t.update_ms = r.backward_ms * scale;
    else if (r.name == "(other)" || r.name == "(reduction)") t.step_ms += r.backward_ms * scale;  // loss, zeroing, checks
    else measured[r.name] = {r.forward_ms, r.backward_ms};
  }
  for (const LayerSpec& layer : base.model().layers) {
    const std::string& name = layer.prototype->name();
    const std::string stand_in = profiled_stand_in(name, [&](const std::string& n) { return measured.count(n) > 0; });
    if (!stand_in.empty()) t.layer_ms[name] = measured.at(stand_in);
  }
  return t;
}

// `one_device` (at a data rank's batch) over every rank as `layout`, the step's global
// batch that batch per rank, so that each rank computes as many examples as in `data N`.
CalibrationStep calibration_step(const Recipe& one_device, int ranks, const PlanLayout& layout) {
  return {layout_recipe(one_device, layout, one_device.step_batch() * ranks), layout};
}

// The steps plan --measure calibrates on (CalibrationSteps): data N; pipeline N (as many
// micro-batches) where the model has a layer per rank; tensor T x pipeline N/T
// (N micro-batches, each of a rank's batch as profiled) where a host's T ranks can split
// the blocks: no data axis, whose wait data N sets.
CalibrationSteps calibration_steps(const Recipe& one_device, const Cluster& cluster, bool bf16) {
  const int n = cluster.ranks, t = cluster.per_host();
  PlanLayout data_n{n};
  data_n.bf16 = bf16;
  CalibrationSteps on{calibration_step(one_device, n, data_n)};
  if (n > 1 && one_device.model().layers.size() >= static_cast<size_t>(n)) {
    PlanLayout pipeline_n{1, 1, n, n};
    pipeline_n.bf16 = bf16;
    on.pipeline_n = calibration_step(one_device, n, pipeline_n);
  }
  if (t > 1) {
    PlanLayout tensor_t{1, t, n / t, n};
    tensor_t.bf16 = bf16;
    try {
      CalibrationStep step = calibration_step(one_device, n, tensor_t);
      mesh_rank_bytes(step.recipe);  // builds the ranks' models: refuses blocks that do not split over t
      on.tensor_t = std::move(step);
    } catch (const UserError& e) {
      log::info("plan --measure: no {} calibration step: {}", tensor_t.str(), e.what());
    }
  }
  return on;
}

// Whether every calibration step `on` (of the whole model) fits a rank of `base`:
// strategy.device_memory where given, else the host memory free for each of a host's
// ranks. Steps of the model's first blocks alone priced the whole model's layouts 10-35%
// off (docs/BENCHMARKS.md): their embedding, head and messages weigh more beside less work.
bool calibrates_whole_model(const Recipe& base, const Cluster& cluster, int64_t global_batch, const CalibrationSteps& on) {
  const int64_t budget = base.strategy.device_memory > 0
                             ? base.strategy.device_memory
                             : available_host_memory().value_or(INT64_MAX) / cluster.per_host();
  std::vector<PlanLayout> layouts{on.data_n.layout};
  for (const auto* step : {&on.pipeline_n, &on.tensor_t})
    if (*step) layouts.push_back((*step)->layout);
  for (const PlanLayout& l : layouts) {
    try {
      if (largest_rank(layout_recipe(base, l, global_batch), l).total() > budget) return false;
    } catch (const UserError&) {
      return false;
    }
  }
  return true;
}

// A profile is taken on this machine: one its memory cannot hold (a model meant for larger
// devices, even with its repeat blocks cut to their first copies) is refused before any is
// taken.
void check_profile_fits(const Recipe& base, int64_t micro, bool bf16, int threads, bool measure) {
  const Recipe profiled = profile_recipe(base, micro, bf16, threads);
  PlanLayout one;
  one.bf16 = bf16;
  const int64_t needs = largest_rank(profiled, one).total();
  const std::optional<int64_t> available = available_host_memory();
  DT_USER_CHECK(!available || needs <= *available, "plan {}: profiling its layers here at a micro-batch of {} needs {} "
                "(its repeat blocks cut to {}) but this machine has {} available; {}price a device's layers from "
                "their work instead: --device-tflops and --device-bandwidth (e.g. 400 and 3.35TB/s)", base.file, micro,
                format_bytes(needs), kProfiledBlocks, format_bytes(*available), measure ? "without --measure, " : "");
}

}  // namespace

int threads_per_rank(const PlanArgs& a, const Cluster& cluster) { return std::max(1, a.cores / cluster.per_host()); }
double ranks_per_core(const PlanArgs& a, const Cluster& cluster) {
  return std::max(1.0, static_cast<double>(cluster.per_host()) / a.cores);
}

// One profile per micro-batch size and precision, taken in rounds that visit every size in
// turn: a shared machine's speed changes from one minute to the next (this 2-core VM's
// single-thread step swung 1.6x within seconds), and rounds spread over the whole
// measurement give every size the same mix of fast and slow spells.
LayerTimesBy profiles_in_rounds(const Recipe& base, const PlanArgs& a, const Cluster& cluster, int64_t global_batch,
                                const std::vector<Candidate>& candidates) {
  const int64_t value_bytes = model_value_bytes(base, global_batch);
  const auto needed = profiles_needed(candidates, global_batch);
  if (a.rate.given()) {
    LayerTimesBy priced;
    for (const auto& [micro, bf16] : needed) priced.emplace(std::pair{micro, bf16}, rated_layer_times(base, micro, bf16, a.rate, value_bytes));
    return priced;
  }
  for (const auto& [micro, bf16] : needed) check_profile_fits(base, micro, bf16, threads_per_rank(a, cluster), a.measure);
  std::map<std::pair<int64_t, bool>, std::vector<LayerTimes>> rounds;
  for (const auto& key : needed) rounds[key];
  for (int64_t r = 0; r < a.profile_rounds; ++r)
    for (auto& [key, taken] : rounds)
      taken.push_back(layer_times(base, key.first, key.second, a.profile_steps, threads_per_rank(a, cluster), value_bytes));
  LayerTimesBy profiles;
  for (const auto& [key, taken] : rounds) profiles.emplace(key, mean_of(taken));
  return profiles;
}

// Ranks that share a core lose more inside a step than their turns (this VM: 4 ranks on 2
// cores took 2.0-2.1x one alone side by side, and a step priced so came out 10-30% low),
// and a data axis across hosts waits for the slower host: real steps on every rank
// calibrate both (calibrate_on_steps), of the whole model where they fit, else of its
// first blocks.
CoreSharing calibrate(MpiCommunicator& world, const PlanArgs& a, const Recipe& base, const Cluster& cluster,
                      const Links& links, int64_t global_batch, bool bf16) {
  const int64_t data_rank_batch = std::max<int64_t>(1, global_batch / a.ranks);
  const int threads = threads_per_rank(a, cluster);
  check_profile_fits(base, data_rank_batch, bf16, threads, true);
  const Recipe whole = profile_recipe(base, data_rank_batch, bf16, threads, 0);
  CalibrationSteps on = calibration_steps(whole, cluster, bf16);
  const bool on_whole = calibrates_whole_model(base, cluster, global_batch, on);
  const Recipe calibrated = on_whole ? whole : profile_recipe(base, data_rank_batch, bf16, threads);
  if (!on_whole) on = calibration_steps(calibrated, cluster, bf16);
  if (world.rank() == 0)
    log::info("plan --measure: calibrating on steps of {}", on_whole ? "the whole model" : fmt::format(
        "its first {} blocks (the whole model's calibration steps do not fit a rank)", kProfiledBlocks));
  const int64_t calibrated_bytes = model_value_bytes(calibrated, data_rank_batch);
  const auto profile_alone = [&] {
    return layer_times(calibrated, data_rank_batch, bf16, a.profile_steps, threads, calibrated_bytes);
  };
  return calibrate_on_steps(world, cluster, links, on, ranks_per_core(a, cluster), profile_alone, a.profile_steps,
                            a.profile_rounds);
}

}  // namespace distrain::cli
