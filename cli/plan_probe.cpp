#include "cli/plan_probe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "cli/bench_steps.hpp"
#include "core/base/error.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/tensor/tensor.hpp"

namespace distrain::cli {

namespace {

constexpr int kRepeats = 10, kFewestRepeats = 3;
constexpr double kProbeSeconds = 4;  // what one probe's timed calls take at most, unless kFewestRepeats do

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
    return (n - 1.0) * static_cast<double>(part) * layers * 4.0 / std::max(1e-9, moving);
  };
  return {rate(scatter_s), rate(gather_s)};
}

// Latency and bandwidth of a ring all-reduce among n ranks: t = 2(n - 1)(latency + bytes / n / bandwidth).
void fit(Communicator& group, Communicator& world, int64_t floats, double& bytes_per_s, double& latency_s) {
  const int n = group.size();
  const double small = median_all_reduce_s(group, world, 2), large = median_all_reduce_s(group, world, floats);
  latency_s = small / (2.0 * (n - 1));
  const double per_byte = std::max(1e-12, (large - small) / (2.0 * (n - 1)) / (static_cast<double>(floats) * 4.0 / n));
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
  return static_cast<double>(floats) * 4.0 / median;
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

CoreSharing calibrate_on_steps(MpiCommunicator& world, const Cluster& cluster, const Links& links,
                               const CalibrationStep& data_n, const std::optional<CalibrationStep>& pipeline_n,
                               double ranks_per_core, const std::function<LayerTimes()>& profile_alone, int64_t steps,
                               int64_t rounds) {
  std::vector<LayerTimes> alone;  // rank 0's
  double data_ms = 0, pipeline_ms = 0;
  for (int64_t r = 0; r < rounds; ++r) {  // in turn, so that all see the machine's fast and slow spells
    world.barrier();
    if (world.rank() == 0) alone.push_back(profile_alone());
    world.barrier();
    data_ms += median_step_ms_in_job(data_n.recipe, steps, 2) / static_cast<double>(rounds);
    if (pipeline_n) pipeline_ms += median_step_ms_in_job(pipeline_n->recipe, steps, 2) / static_cast<double>(rounds);
  }
  std::vector<float> fitted(2, 0.0f);  // rank 0's slowdown and wait, to every rank
  if (world.rank() == 0) {
    const LayerTimes times = mean_of(alone);
    const CalibrationStep& sets_pace = pipeline_n ? *pipeline_n : data_n;
    const double pace_ms = pipeline_n ? pipeline_ms : data_ms;
    CoreSharing cores{ranks_per_core, slowdown_for_step(sets_pace.recipe, sets_pace.layout, cluster, links, times,
                                                        ranks_per_core, pace_ms)};
    if (cores.measured_slowdown <= 1.0 && ranks_per_core > 1.0) {  // its links' price alone exceeds the step
      log::warn("plan --measure: the {} step of the profiled blocks took {:.1f} ms, no more than plan prices it with "
                "the profile's own speed ({:.1f} ms): its links are priced too slow to calibrate compute on, which "
                "keeps the slowdown of the ranks' turns ({:.2f}x)",
                sets_pace.layout.str(), pace_ms,
                estimate_step(sets_pace.recipe, sets_pace.layout, cluster, links, times, times.value_bytes,
                              CoreSharing{ranks_per_core, 1.0}).total_ms(),
                ranks_per_core);
      cores.measured_slowdown = ranks_per_core;
    }
    if (pipeline_n) cores.data_wait_share = data_wait_for_step(data_n.recipe, data_n.layout, cluster, links, times, cores, data_ms);
    fitted = {static_cast<float>(cores.measured_slowdown), static_cast<float>(cores.data_wait_share)};
    log::info("plan --measure: steps of the profiled blocks on every rank, the mean of {} round(s)' medians: {}{:.1f} ms as "
              "{}; compute {:.2f}x slower than alone, the data axis waits {:.1f}% of its compute",
              rounds, pipeline_n ? fmt::format("{:.1f} ms as {}, ", pipeline_ms, pipeline_n->layout.str()) : "", data_ms,
              data_n.layout.str(), cores.measured_slowdown, cores.data_wait_share * 100);
  }
  world.all_reduce(host_tensor(fitted.data(), 2), ReduceOp::sum);
  return CoreSharing{ranks_per_core, fitted[0], fitted[1]};
}

}  // namespace distrain::cli
