// zero (ZeRO, Rajbhandari et al. 2020), stage 1: optimizer state sharded. Every replica
// holds the whole model and computes gradients on its slice; gradients are all-reduced;
// replica g owns the contiguous range [g*S, g*S + S) of the parameter arena (S = arena /
// replicas, rounded up to 16 floats), keeps optimizer slots for that range only, updates
// it, and the ranges are all-gathered so every replica has the new parameters.
// Replicas are the listed devices (threads, `local` communicator) or, under mpirun/srun,
// one device per worker (`mpi`). Stages 2 and 3 are not implemented yet.
#pragma once
#include "core/strategy/strategy.hpp"

namespace distrain {

std::unique_ptr<Strategy> make_zero(const Recipe& recipe);

}  // namespace distrain
