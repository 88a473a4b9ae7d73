#include "cli/plan_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/train/bench_measure.hpp"
#include "core/base/dtype.hpp"
#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/tensor/tensor.hpp"

namespace distrain::cli {

namespace {

constexpr int kRepeats = 10, kFewestRepeats = 3;
constexpr double kProbeSeconds = 4;  // what one probe's timed calls take at most, unless kFewestRepeats do
constexpr double kFloatBytes = static_cast<double>(dtype_size(DType::f32));  // the probes send float32

// The median seconds of `run` over timed calls after 2 untimed, the ranks of `group`
// starting together: kRepeats, or as many as fit kProbeSeconds at the second untimed
// call's pace, at least kFewestRepeats (a gradient-sized all-reduce over 100 Mbit/s takes
// seconds). The pace is the slowest rank's of `world`, whose other groups time the same at
// once: every group makes the same calls, and shares the links to the last.
template <typename Run>
double median_s(Communicator& group, Communicator& world, Run run) {
  const auto timed = [&] {
    group.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    run();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  timed();
  float pace = static_cast<float>(timed());
  world.all_reduce(host_tensor(&pace, 1), ReduceOp::max);
  const int repeats =
      std::clamp(static_cast<int>(kProbeSeconds / std::max(1e-9, static_cast<double>(pace))), kFewestRepeats, kRepeats);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) times.push_back(timed());
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double median_all_reduce_s(Communicator& group, Communicator& world, int64_t floats) {
  std::vector<float> values(static_cast<size_t>(floats), 1.0f);
  return median_s(group, world, [&] { group.all_reduce(host_tensor(values.data(), floats), ReduceOp::sum); });
}

// `floats` cut into `layers` parts, each reduce-scattered, then each all-gathered, as ZeRO
// sends each layer's gradients and weights: each kind's rate as half a ring all-reduce's,
// less a latency per collective. They are timed apart: MPI runs them by other algorithms
// (a ZeRO-3 step gathers twice as often as it scatters).
ShardRates shard_rates(Communicator& group, Communicator& world, int64_t floats, int layers, double latency_s) {
  const int n = group.size();
  const int64_t part = std::max<int64_t>(1, floats / layers / n);
  std::vector<float> whole(static_cast<size_t>(part * n), 1.0f), mine(static_cast<size_t>(part));
  const Tensor whole_t = host_tensor(whole.data(), part * n), mine_t = host_tensor(mine.data(), part);
  const double scatter_s = median_s(group, world, [&] {
    for (int l = 0; l < layers; ++l) group.reduce_scatter(whole_t, mine_t, ReduceOp::sum);
  });
  const double gather_s = median_s(group, world, [&] {
    for (int l = 0; l < layers; ++l) group.all_gather(mine_t, whole_t);
  });
  const auto rate = [&](double median) {
    const double moving = median - (n - 1.0) * layers * latency_s;
    return (n - 1.0) * static_cast<double>(part) * layers * kFloatBytes / std::max(1e-9, moving);
  };
  return {rate(scatter_s), rate(gather_s)};
}

// Latency and bandwidth of a ring all-reduce among n ranks: t = 2(n - 1)(latency + bytes / n / bandwidth).
void fit(Communicator& group, Communicator& world, int64_t floats, double& bytes_per_s, double& latency_s) {
  const int n = group.size();
  const double small = median_all_reduce_s(group, world, 2), large = median_all_reduce_s(group, world, floats);
  latency_s = small / (2.0 * (n - 1));
  const double per_byte = std::max(1e-12, (large - small) / (2.0 * (n - 1)) / (static_cast<double>(floats) * kFloatBytes / n));
  bytes_per_s = 1.0 / per_byte;
}

// A ring shift of a message of `floats` in `group` (each rank sends to the next while it receives
// from the one before), as pipeline stages send: the message rate.
double message_bytes_per_s(MpiCommunicator& group, Communicator& world, int64_t floats) {
  const int n = group.size(), next = (group.rank() + 1) % n, before = (group.rank() + n - 1) % n;
  std::vector<float> out(static_cast<size_t>(floats), 1.0f), in(static_cast<size_t>(floats));
  const double median = median_s(group, world, [&] {
    const int64_t id = group.start_send(host_tensor(out.data(), floats), next, 1, "the probe's message");
    group.recv(host_tensor(in.data(), floats), before, 1, "the probe's message");
    group.wait_send(id);
  });
  return static_cast<double>(floats) * kFloatBytes / median;
}

}  // namespace

Links measure_links(MpiCommunicator& world, const Cluster& cluster, const Links& given, int64_t bytes,
                    int64_t message_bytes, int layers) {
  const int64_t floats = std::max<int64_t>(bytes / 4, 1 << 14);
  const int64_t message_floats = std::max<int64_t>(message_bytes / 4, 1 << 14);
  DT_USER_CHECK(world.size() == cluster.ranks, "plan --measure runs on the cluster it plans: launch it with mpirun -np {} "
                "(--ranks), one process per rank (this job has {})", cluster.ranks, world.size());
  Links links = given;
  const std::unique_ptr<MpiCommunicator> host = world.split(world.rank() / cluster.per_host());
  const std::unique_ptr<MpiCommunicator> across = world.split(world.rank() % cluster.per_host());
  if (cluster.per_host() > 1) {
    fit(*host, world, floats, links.intra_bytes_per_s, links.intra_latency_s);
    links.intra_message_bytes_per_s = message_bytes_per_s(*host, world, message_floats);
    links.intra_shard = shard_rates(*host, world, floats, layers, links.intra_latency_s);
  }
  if (cluster.hosts > 1) {
    fit(*across, world, floats, links.inter_bytes_per_s, links.inter_latency_s);
    links.inter_message_bytes_per_s = message_bytes_per_s(*across, world, message_floats);
    links.inter_shard = shard_rates(*across, world, floats, layers, links.inter_latency_s);
    // Every rank of a host sent over its link at once: the link's rates.
    links.inter_bytes_per_s *= cluster.per_host();
    links.inter_message_bytes_per_s *= cluster.per_host();
    links.inter_shard = links.inter_shard.times(cluster.per_host());
  }
  if (cluster.hosts > 1 && cluster.per_host() > 1) {  // a ring through both links: the whole job's
    fit(world, world, floats, links.both_bytes_per_s, links.both_latency_s);
    links.both_shard = shard_rates(world, world, floats, layers, links.both_latency_s);
  }
  return links;
}

namespace {

constexpr double kLongRoundSeconds = 20;

// A calibration step's time in the job: the mean of its rounds' medians, in ms (0 for a
// step not run). A step whose round took over kLongRoundSeconds (data N over a slow link:
// seconds a step) runs no more rounds: it spans the machine's fast and slow spells itself.
struct StepRounds {
  double sum_ms = 0;
  int runs = 0;
  bool again = true;
  void run(Communicator& world, const Recipe& recipe, int64_t steps) {
    if (!again) return;
    const auto t0 = std::chrono::steady_clock::now();
    sum_ms += median_step_ms_in_job(recipe, steps, 2);
    ++runs;
    float took = static_cast<float>(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    world.all_reduce(host_tensor(&took, 1), ReduceOp::max);  // every rank decides alike
    again = took <= kLongRoundSeconds;
  }
  double ms() const { return runs > 0 ? sum_ms / runs : 0; }
};

struct CalibrationTimes {
  StepRounds data, pipeline, tensor;
};

double priced_ms(const CalibrationStep& step, const Cluster& cluster, const Links& links, const LayerTimes& times,
                 const CoreSharing& cores) {
  return estimate_step(step.recipe, step.layout, cluster, links, times, times.value_bytes, cores).total_ms();
}

void warn_too_fast_to_calibrate(const CalibrationStep& step, double measured_ms, double priced_ms, const std::string& kept) {
  log::warn("plan --measure: the {} calibration step took {:.1f} ms, no more than plan prices it with the "
            "profile's own speed ({:.1f} ms): its links are priced too slow to calibrate compute on, which keeps {}",
            step.layout.str(), measured_ms, priced_ms, kept);
}

// Rank 0's fit of the calibration's figures to the steps' times, against `times` (its
// profile alone); calibrate_on_steps says what each step sets.
CoreSharing fit_calibration(const Cluster& cluster, const Links& links, const CalibrationSteps& on, double ranks_per_core,
                            const LayerTimes& times, const CalibrationTimes& took) {
  const CalibrationStep& sets_pace = on.pipeline_n ? *on.pipeline_n : on.data_n;
  const double pace_ms = on.pipeline_n ? took.pipeline.ms() : took.data.ms();
  CoreSharing cores{ranks_per_core};
  cores.measured_slowdown = slowdown_for_step(sets_pace.recipe, sets_pace.layout, cluster, links, times, cores,
                                              &CoreSharing::measured_slowdown, pace_ms);
  if (cores.measured_slowdown <= 1.0 && ranks_per_core > 1.0) {
    warn_too_fast_to_calibrate(sets_pace, pace_ms, priced_ms(sets_pace, cluster, links, times, {ranks_per_core, 1.0}),
                               fmt::format("the slowdown of the ranks' turns ({:.2f}x)", ranks_per_core));
    cores.measured_slowdown = ranks_per_core;
  }
  if (on.pipeline_n) cores.data_wait_share = data_wait_for_step(on.data_n.recipe, on.data_n.layout, cluster, links, times,
                                                                cores, took.data.ms());
  if (!on.tensor_t) return cores;
  cores.tensor_slowdown = slowdown_for_step(on.tensor_t->recipe, on.tensor_t->layout, cluster, links, times, cores,
                                            &CoreSharing::tensor_slowdown, took.tensor.ms());
  if (cores.tensor_slowdown <= 1.0 && ranks_per_core > 1.0) {
    CoreSharing alone = cores;
    alone.tensor_slowdown = 1.0;
    warn_too_fast_to_calibrate(*on.tensor_t, took.tensor.ms(), priced_ms(*on.tensor_t, cluster, links, times, alone),
                               fmt::format("the other layouts' slowdown for it ({:.2f}x)", cores.measured_slowdown));
    cores.tensor_slowdown = 0;
  }
  return cores;
}

// "298.0 ms as data 1 x pipeline 4 (4 micro-batches) (3 rounds), ...".
std::string took_line(const CalibrationSteps& on, const CalibrationTimes& took) {
  const auto one = [](const StepRounds& t, const CalibrationStep& step) {
    return fmt::format("{:.1f} ms as {} ({} round{})", t.ms(), step.layout.str(), t.runs, t.runs == 1 ? "" : "s");
  };
  std::vector<std::string> parts;
  if (on.pipeline_n) parts.push_back(one(took.pipeline, *on.pipeline_n));
  parts.push_back(one(took.data, on.data_n));
  if (on.tensor_t) parts.push_back(one(took.tensor, *on.tensor_t));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

CoreSharing calibrate_on_steps(MpiCommunicator& world, const Cluster& cluster, const Links& links,
                               const CalibrationSteps& on, double ranks_per_core,
                               const std::function<LayerTimes()>& profile_alone, int64_t steps, int64_t rounds) {
  std::vector<LayerTimes> alone;  // rank 0's
  CalibrationTimes took;
  for (int64_t r = 0; r < rounds; ++r) {  // in turn, so that all see the machine's fast and slow spells
    world.barrier();
    if (world.rank() == 0) alone.push_back(profile_alone());
    world.barrier();
    took.data.run(world, on.data_n.recipe, steps);
    if (on.pipeline_n) took.pipeline.run(world, on.pipeline_n->recipe, steps);
    if (on.tensor_t) took.tensor.run(world, on.tensor_t->recipe, steps);
  }
  std::vector<float> fitted(3, 0.0f);  // rank 0's, to every rank
  if (world.rank() == 0) {
    const CoreSharing cores = fit_calibration(cluster, links, on, ranks_per_core, mean_of(alone), took);
    fitted = {static_cast<float>(cores.measured_slowdown), static_cast<float>(cores.data_wait_share),
              static_cast<float>(cores.tensor_slowdown)};
    log::info("plan --measure: calibration steps on every rank, the mean of their rounds' medians: {}; compute "
              "{:.2f}x slower than alone{}, the data axis waits {:.1f}% of its compute",
              took_line(on, took), cores.measured_slowdown,
              cores.tensor_note(),
              cores.data_wait_share * 100);
  }
  world.all_reduce(host_tensor(fitted.data(), 3), ReduceOp::sum);
  return CoreSharing{ranks_per_core, fitted[0], fitted[1], fitted[2]};
}

}  // namespace distrain::cli
