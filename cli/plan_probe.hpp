// `distrain plan --measure`: the links measured on the cluster itself, and the compute's
// pace in a real step there. Run under the launcher with --ranks processes; every group
// all-reduces at once, as a step's collectives do, through the communicator training uses
// (so its waiting counts too).
#pragma once
#include <functional>
#include <optional>

#include "core/plan/plan_cost.hpp"
#include "core/plan/plan_layouts.hpp"
#include "core/comm/mpi_communicator.hpp"

namespace distrain::cli {

// Intra-host: among each host's ranks; inter-host: among the ranks with the same place on
// every host, all groups at once. Each: the latency from an 8-byte all-reduce, the
// bandwidth from one of `bytes` (the model's gradients: MPI picks its algorithm by size;
// ring all-reduce times, medians of 3 to 10 calls, as many as fit 4 s), the rate of
// messages of `message_bytes` sent round the group (pipeline stages' messages: the largest
// a stage sends), and ZeRO's rates: `bytes` cut into `layers` equal parts, each
// reduce-scattered and all-gathered, as a step sends a model of that many layers with
// weights. With several hosts of several ranks, the same all-reduce and ZeRO rates of the
// whole job: a ring through both links. A link the cluster lacks (one host, one rank per
// host) keeps `given`'s figures.
// Throws UserError when `world`'s size is not cluster.ranks.
Links measure_links(MpiCommunicator& world, const Cluster& cluster, const Links& given, int64_t bytes,
                    int64_t message_bytes, int layers);

// A step plan --measure runs on every rank: the whole model, or where its steps do not fit
// a rank its first blocks, as `layout` (layout_recipe).
struct CalibrationStep {
  Recipe recipe;
  PlanLayout layout;
};

// The steps plan --measure calibrates on: the model over every rank as data N, as
// pipeline N where it has a layer per rank, and as tensor T x pipeline N/T (T a host's
// ranks) where hosts have several ranks and the model splits over them.
struct CalibrationSteps {
  CalibrationStep data_n;
  std::optional<CalibrationStep> pipeline_n, tensor_t;
};

// How `plan` prices compute and the data axis's waits on this cluster: real steps of the
// model, each rank with a data rank's batch, timed as bench times them, against the steps
// estimate_step predicts for them from `profile_alone()` (rank 0's profile at that batch,
// as plan profiles the layouts, the others asleep in a barrier), on ranks that share their
// cores `ranks_per_core` to one:
// - `pipeline_n` sets the slowdown on the profile that makes its step agree (at least 1):
//   what ranks sharing a core lose inside a step besides their turns, which profiles run
//   side by side miss;
// - `data_n` then its data axis's wait (CoreSharing::data_wait_share): what its step took
//   beyond that price, as a share of its compute (the ranks' wait at the all-reduce for the
//   slower host's). Without `pipeline_n`, `data_n` sets the slowdown and the wait is 0;
// - `tensor_t` the tensor layouts' slowdown (CoreSharing::tensor_slowdown).
// A step that plan prices above its measured time even at the profile's speed (its links
// priced too slow: a pipeline's messages on a slow link) cannot calibrate compute: the
// slowdown then keeps the ranks' turns (`ranks_per_core`), the tensor layouts the others',
// with a warning. Alone and in the job taken in turn `rounds` times and averaged, `steps`
// steps after 2; a step whose round took over 20 s runs once. Every rank returns it.
CoreSharing calibrate_on_steps(MpiCommunicator& world, const Cluster& cluster, const Links& links,
                               const CalibrationSteps& on, double ranks_per_core,
                               const std::function<LayerTimes()>& profile_alone, int64_t steps, int64_t rounds);

}  // namespace distrain::cli
