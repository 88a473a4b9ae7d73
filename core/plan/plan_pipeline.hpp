// A pipeline's step as `distrain plan` predicts it: the schedule (core/strategy/
// pipeline_schedule.hpp) run op by op in simulated time. Each stage runs its forwards and
// backwards in the schedule's order, each waiting for its input from the neighbouring
// stage (a message that crosses the link between them, one at a time per direction).
// The ranks at work on a host share its cores: with more of them than cores each runs at
// cores / ranks of its speed, so a stage whose neighbour on the same host waits computes
// faster. A formula for the bubble cannot say that when stages share hosts: with 4 stages on
// 2 hosts of one core each, the hosts' cores idle by turns as micro-batches pass.
#pragma once
#include <utility>
#include <vector>

#include "core/strategy/pipeline_schedule.hpp"

namespace distrain {

struct PipeStage {
  // One micro-batch's work on a rank of the stage at the full speed of a core, in seconds,
  // and the time its collectives take besides (the tensor axis's: no core's work).
  double forward_s = 0, backward_s = 0;
  double forward_wait_s = 0, backward_wait_s = 0;
  double message_s = 0;  // one message to the next stage or back from it
  std::vector<std::pair<int, int>> ranks_on_host;  // (host, the stage's ranks there)
};

// Seconds from the step's first forward to the last backward; `host_cores` per host.
double simulate_pipeline(const std::vector<PipeStage>& stages, PipeSchedule schedule, int micro_batches,
                         const std::vector<double>& host_cores);

}  // namespace distrain
