// Helpers shared by the multi-replica strategies: copying one replica's variables,
// optimizer slots and iteration count to another (or to every worker), checksums of
// parameters, and metric sums across workers.
#pragma once
#include "core/comm/mpi_communicator.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/replica.hpp"
#include "core/strategy/replica_threads.hpp"

namespace distrain {

// to := from (values, state, optimizer slots and iterations), across devices via the host.
void copy_replica(Replica& from, Optimizer& from_opt, Replica& to, Optimizer& to_opt);
// Every worker's replica takes worker 0's.
void broadcast_from_first(Replica& replica, Optimizer& optimizer, MpiCommunicator& world);
// Sum of all trainable values, in arena order (bitwise equal for bitwise equal models).
double checksum(Model& model);
// Replicas apply identical updates to identical values, so their parameters must be
// bitwise equal; throws naming the first replica whose checksum differs from replica 0's.
void check_checksums(const std::vector<double>& sums, int replicas_per_worker, int64_t step);
LossStats sum_over_workers(LossStats local, MpiCommunicator& world);
// Every local replica zeroes its gradients and runs forward and backward on its slice (one
// thread each); returns the metrics summed over the local replicas. first_replica is the
// job-wide number of replicas[0] (it seeds dropout differently per replica).
LossStats compute_replica_gradients(ReplicaThreads& threads, std::vector<std::unique_ptr<Replica>>& replicas,
                                    const Batch& batch, uint64_t step_seed, int first_replica);

}  // namespace distrain
