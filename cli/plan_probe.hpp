// `distrain plan --measure`: the links measured on the cluster itself. Run under the
// launcher with --ranks processes; every group all-reduces at once, as a step's
// collectives do, through the communicator training uses (so its waiting counts too).
#pragma once
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

// How much slower a one_device step of `profiled` runs on every rank of `world` at once
// than on rank 0 alone (the others asleep in a barrier): the median steps of `steps` after
// 2, the ranks' mean against rank 0's, alone and at once taken in turn `rounds` times and
// summed. Every rank returns it.
double measure_compute_slowdown(MpiCommunicator& world, const Recipe& profiled, int64_t steps, int64_t rounds);

}  // namespace distrain::cli
