// `distrain plan --measure`: the links measured on the cluster itself, and the compute's
// pace in a real step there. Run under the launcher with --ranks processes; every group
// all-reduces at once, as a step's collectives do, through the communicator training uses
// (so its waiting counts too).
#pragma once
#include <functional>

#include "cli/plan_cost.hpp"
#include "cli/plan_layouts.hpp"
#include "core/comm/mpi_communicator.hpp"

namespace distrain::cli {

// Intra-host: among each host's ranks; inter-host: among the ranks with the same place on
// every host. Each: the latency from an 8-byte all-reduce, the bandwidth from one of
// `bytes` (the model's gradients: MPI picks its algorithm by size; ring all-reduce times,
// medians of 10), and the rate of messages of `bytes` sent round the group at once
// (pipeline stages' messages), and ZeRO's rate: `bytes` cut into `layers` equal parts, each
// reduce-scattered and all-gathered, as a step sends a model of that many layers with
// weights. With several hosts of several ranks, the same all-reduce and ZeRO rates of the
// whole job: a ring through both links. A link the cluster lacks (one host, one rank per
// host) keeps `given`'s figures.
// Throws UserError when `world`'s size is not cluster.ranks.
Links measure_links(MpiCommunicator& world, const Cluster& cluster, const Links& given, int64_t bytes, int layers);

// The compute slowdown `plan` prices every layout with: a real step of `data_n` (the
// profiled blocks as `layout`, data over every rank, each with a data rank's batch) timed on
// the cluster as bench times it, against the step estimate_step predicts for it from
// `profile_alone()` (rank 0's profile of the same blocks and batch, the others asleep in a
// barrier), on ranks that share their cores `ranks_per_core` to one: the factor on the
// profile that makes the two agree (at least 1). It holds
// what ranks sharing a core lose inside a step (besides their turns: caches, the waits at
// each collective, the slowest host's pace), which profiles run side by side miss. Alone
// and in the job taken in turn `rounds` times and averaged, `steps` steps after 2. Every
// rank returns it.
double measure_compute_slowdown(MpiCommunicator& world, const Cluster& cluster, const Links& links, const Recipe& data_n,
                                const PlanLayout& layout, double ranks_per_core,
                                const std::function<LayerTimes()>& profile_alone, int64_t steps, int64_t rounds);

}  // namespace distrain::cli
