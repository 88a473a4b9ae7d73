// What `distrain plan` was asked (its flags), and what it measures on this machine: the
// layers' times of each micro-batch size the layouts need, and with --measure the
// calibration of the cost model on real steps of every rank.
#pragma once
#include <string>
#include <vector>

#include "cli/plan_probe.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/plan/device_rate.hpp"
#include "core/plan/plan_search.hpp"

namespace distrain::cli {

struct PlanArgs {
  std::string recipe, links, device_memory, write, precision;
  std::vector<std::string> overrides;
  int ranks = 0, hosts = 1, cores = 0, top = 10;
  int64_t profile_steps = 5, profile_rounds = 3;
  bool json = false, measure = false;
  double device_tflops = 0;
  std::string device_bandwidth;
  DeviceRate rate;  // from the two above: layers priced on that device, not profiled here
};

// A host's cores are split among its ranks; with fewer cores than ranks they take turns.
int threads_per_rank(const PlanArgs& a, const Cluster& cluster);
double ranks_per_core(const PlanArgs& a, const Cluster& cluster);

// The layers' times of every micro-batch size and precision `candidates` need
// (profiles_needed): priced on a.rate's device where given, else profiled here.
LayerTimesBy profiles_in_rounds(const Recipe& base, const PlanArgs& a, const Cluster& cluster, int64_t global_batch,
                                const std::vector<Candidate>& candidates);

// plan --measure: real steps on every rank calibrate the cost model (calibrate_on_steps).
CoreSharing calibrate(MpiCommunicator& world, const PlanArgs& a, const Recipe& base, const Cluster& cluster,
                      const Links& links, int64_t global_batch, bool bf16);

}  // namespace distrain::cli
