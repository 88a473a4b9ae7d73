#include "core/strategy/pipeline_schedule.hpp"

#include <algorithm>

#include "core/base/error.hpp"

namespace distrain {

PipeSchedule parse_pipe_schedule(const std::string& name) {
  if (name == "gpipe") return PipeSchedule::gpipe;
  DT_CHECK(name == "1f1b", "pipeline schedule '{}'", name);
  return PipeSchedule::one_f_one_b;
}

std::vector<PipeOp> pipeline_ops(PipeSchedule schedule, int stage, int stages, int micro) {
  std::vector<PipeOp> ops;
  const int warmup = schedule == PipeSchedule::gpipe ? micro : std::min(stages - stage - 1, micro);
  int next_f = 0, next_b = 0;
  for (; next_f < warmup; ++next_f) ops.push_back({true, next_f});
  while (next_f < micro) {  // steady state: one forward, one backward
    ops.push_back({true, next_f++});
    ops.push_back({false, next_b++});
  }
  while (next_b < micro) ops.push_back({false, next_b++});
  return ops;
}

int micro_batches_in_flight(PipeSchedule schedule, int stage, int stages, int micro) {
  return schedule == PipeSchedule::gpipe ? micro : std::min(stages - stage, micro);
}

}  // namespace distrain
