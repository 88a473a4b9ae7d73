// Helpers shared by the multi-replica strategies: copying one replica's variables,
// optimizer slots and iteration count to another (or to every worker), checksums of
// parameters, and metric sums across workers.
#pragma once
#include "core/comm/mpi_communicator.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/replica.hpp"

namespace distrain {

// to := from (values, state, optimizer slots and iterations), across devices via the host.
void copy_replica(Replica& from, Optimizer& from_opt, Replica& to, Optimizer& to_opt);
// Every worker's replica takes worker 0's.
void broadcast_from_first(Replica& replica, Optimizer& optimizer, MpiCommunicator& world);
// Sum of all trainable values, in arena order (bitwise equal for bitwise equal models).
double checksum(Model& model);
LossStats sum_over_workers(LossStats local, MpiCommunicator& world);

}  // namespace distrain
