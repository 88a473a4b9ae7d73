#include "cli/plan_probe.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/base/error.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/tensor/tensor.hpp"

namespace distrain::cli {

namespace {

constexpr int kRepeats = 10;
constexpr int64_t kLargeFloats = 1 << 20;  // 4 MiB

double median_all_reduce_s(Communicator& group, int64_t floats) {
  std::vector<float> values(static_cast<size_t>(floats), 1.0f);
  std::vector<double> times;
  for (int i = 0; i < kRepeats + 2; ++i) {
    group.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    group.all_reduce(host_tensor(values.data(), floats), ReduceOp::sum);
    if (i >= 2) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Latency and bandwidth of a ring all-reduce among n ranks: t = 2(n - 1)(latency + bytes / n / bandwidth).
void fit(Communicator& group, double& bytes_per_s, double& latency_s) {
  const int n = group.size();
  const double small = median_all_reduce_s(group, 2), large = median_all_reduce_s(group, kLargeFloats);
  latency_s = small / (2.0 * (n - 1));
  const double per_byte = std::max(1e-12, (large - small) / (2.0 * (n - 1)) / (kLargeFloats * 4.0 / n));
  bytes_per_s = 1.0 / per_byte;
}

}  // namespace

Links measure_links(const Cluster& cluster, const Links& given) {
  MpiCommunicator world(60.0);
  DT_USER_CHECK(world.size() == cluster.ranks, "plan --measure runs on the cluster it plans: launch it with mpirun -np {} "
                "(--ranks), one process per rank (this job has {})", cluster.ranks, world.size());
  Links links = given;
  const std::unique_ptr<MpiCommunicator> host = world.split(world.rank() / cluster.per_host());
  const std::unique_ptr<MpiCommunicator> across = world.split(world.rank() % cluster.per_host());
  if (cluster.per_host() > 1) fit(*host, links.intra_bytes_per_s, links.intra_latency_s);
  if (cluster.hosts > 1) {
    fit(*across, links.inter_bytes_per_s, links.inter_latency_s);
    links.inter_bytes_per_s *= cluster.per_host();  // every rank of a host sent over its link at once
  }
  return links;
}

}  // namespace distrain::cli
