// zero (ZeRO, Rajbhandari et al. 2020). Replica g owns the contiguous range
// [g*S, g*S + S) of the parameter arena (S = arena / replicas, rounded up to 16 floats):
//   stage 1  optimizer slots for its range only; gradients all-reduced; each replica
//            updates its range and the ranges are all-gathered to every replica;
//   stage 2  plus gradients sharded: there is no gradient arena; each layer's gradients
//            go to a bucket during its backward, are summed over replicas right after,
//            and a replica keeps only the part in its range;
//   stage 3  plus parameters sharded: there is no parameter arena; each layer's
//            parameters are gathered into a bucket just before its forward and its
//            backward and released after; the update touches only the own range.
// Each stage is a parameter gatherer and a gradient reducer given to every replica's model
// (zero_gatherers.hpp, zero_reducers.hpp); zero.cpp picks them once and otherwise does the
// same at every stage. Replicas are the listed devices (threads, `local` communicator) or,
// under mpirun/srun, one device per worker (`mpi`).
#pragma once
#include "core/strategy/replica_mesh.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

// `mesh`: the replicas (this process's, or one per worker under a launcher).
std::unique_ptr<Strategy> make_zero(const Recipe& recipe, ReplicaMesh mesh);

}  // namespace distrain
