// parameter_server (tf.distribute's ParameterServerStrategy, asynchronous): ranks
// 0 .. num_ps-1 serve, the others train. The trainable arena is split into num_ps
// contiguous ranges of about equal size; server k holds range k of the variables and its
// optimizer slots. Each step a worker pulls the current parameters from every server,
// computes gradients on its own batch and pushes each server its range; a server applies
// each push as it arrives (its gradient is the mean over that worker's batch, its rate
// the schedule's for the per-worker batch).
//   staleness = s   a worker may start step t only when every worker has pushed step t-s-1
//                   (stale-synchronous); unbounded when left out (TensorFlow's default);
//   staleness = 0   synchronous: a server sums the pushes of step t from all workers (in
//                   worker order), applies them once with the global batch's rate, and
//                   serves step t+1 after: the same weights as one_device with the global batch.
// Worker 0 writes the checkpoints (gathering values and slots from the servers); every
// rank reads the newest one to resume, each server keeping its range.
#pragma once
#include "core/strategy/strategy.hpp"

namespace distrain {

std::unique_ptr<Strategy> make_parameter_server(const Recipe& recipe);

}  // namespace distrain
