// The order in which a pipeline stage runs the forward (F) and backward (B) passes of a
// step's micro-batches.
//   gpipe  F0 F1 ... F(M-1), then B0 ... B(M-1): every micro-batch's activations are held
//          at once (M in flight).
//   1f1b   PipeDream-Flush: stage s of P first runs min(P - s - 1, M) forwards, then
//          alternates one forward and one backward, then runs the remaining backwards; at
//          most P - s micro-batches are in flight.
// Both leave (P - 1) / (M + P - 1) of a stage's time idle when stages cost the same.
// Micro-batches go forward and backward in increasing order on every stage, so messages
// between neighbours arrive in the order they are needed, and a stage only ever waits for
// something its neighbour does earlier in its own order: no schedule can deadlock.
#pragma once
#include <string>
#include <vector>

namespace distrain {

enum class PipeSchedule { gpipe, one_f_one_b };

// "gpipe" | "1f1b"
PipeSchedule parse_pipe_schedule(const std::string& name);

struct PipeOp {
  bool forward = true;
  int micro = 0;
};

// Stage `stage` of `stages`, `micro` micro-batches: 2 x micro operations.
std::vector<PipeOp> pipeline_ops(PipeSchedule schedule, int stage, int stages, int micro);
// The most micro-batches the stage holds activations for at once under the schedule.
int micro_batches_in_flight(PipeSchedule schedule, int stage, int stages, int micro);

}  // namespace distrain
