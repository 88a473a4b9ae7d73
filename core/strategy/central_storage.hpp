// central_storage (tf.distribute.experimental.CentralStorageStrategy): variables and
// optimizer state live once, on the host (CPU); replicas on the listed devices compute
// gradients, which are summed onto the host in replica order, applied there by the one
// optimizer, and the new variables copied back to every replica.
#pragma once
#include "core/strategy/replica_mesh.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

// `mesh`: this process's replicas (one process).
std::unique_ptr<Strategy> make_central_storage(const Recipe& recipe, ReplicaMesh mesh);

}  // namespace distrain
