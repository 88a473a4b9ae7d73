// mirrored and multi_worker_mirrored (tf.distribute.MirroredStrategy /
// MultiWorkerMirroredStrategy): every replica holds the whole model; after each
// replica's backward, one fused all-reduce sums the gradient arena and every replica
// applies the same update, so variables stay identical (checked every check_every steps).
//   mirrored               one process, one replica per listed device, threads, `local` communicator
//   multi_worker_mirrored  one process per worker under mpirun/srun, each with its listed
//                          local replicas: local all-reduce, MPI all-reduce between workers
//                          (on the first replica's thread), local broadcast
#pragma once
#include "core/strategy/replica_mesh.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

// `mesh`: this process's replicas, joined with other workers' (multi_worker) or alone.
std::unique_ptr<Strategy> make_mirrored(const Recipe& recipe, bool multi_worker, ReplicaMesh mesh);

}  // namespace distrain
