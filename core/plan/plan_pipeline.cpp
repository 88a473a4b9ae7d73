#include "core/plan/plan_pipeline.hpp"

#include <algorithm>
#include <limits>

#include "core/base/error.hpp"

namespace distrain {

namespace {

constexpr double kUnknown = std::numeric_limits<double>::infinity();

// A stage between two events: waiting for its next op's input, working, or waiting for
// the op's collectives.
enum class Phase { idle, work, wait, done };

struct StageState {
  std::vector<PipeOp> ops;
  size_t next = 0;
  Phase phase = Phase::idle;
  double work_left = 0, wait_left = 0;
};

// When messages arrive: activations[s][m] at stage s (from s - 1), gradients[s][m] at stage
// s (from s + 1); each link direction carries one message at a time.
struct Messages {
  std::vector<std::vector<double>> activations, gradients;
  std::vector<double> forward_free, backward_free;  // per link s -> s + 1
  double send(std::vector<double>& link_free, size_t link, double now, double seconds) {
    const double start = std::max(now, link_free[link]);
    return link_free[link] = start + seconds;
  }
};

// When stage s's next op may start: its input's arrival (0 for what needs none).
double input_arrival(const Messages& m, const StageState& st, size_t s, size_t stages) {
  const PipeOp& op = st.ops[st.next];
  const auto micro = static_cast<size_t>(op.micro);
  if (op.forward) return s == 0 ? 0.0 : m.activations[s][micro];
  return s + 1 == stages ? 0.0 : m.gradients[s][micro];  // the last stage's own forward came first
}

// Each working stage's speed: on every host it has ranks on, the cores over the ranks at
// work there, at most 1.
std::vector<double> speeds(const std::vector<PipeStage>& stages, const std::vector<StageState>& state,
                           const std::vector<double>& host_cores) {
  std::vector<double> busy(host_cores.size(), 0.0), speed(stages.size(), 0.0);
  for (size_t s = 0; s < stages.size(); ++s)
    if (state[s].phase == Phase::work)
      for (const auto& [host, ranks] : stages[s].ranks_on_host) busy[static_cast<size_t>(host)] += ranks;
  for (size_t s = 0; s < stages.size(); ++s) {
    if (state[s].phase != Phase::work) continue;
    speed[s] = 1.0;
    for (const auto& [host, ranks] : stages[s].ranks_on_host)
      speed[s] = std::min(speed[s], host_cores[static_cast<size_t>(host)] / busy[static_cast<size_t>(host)]);
  }
  return speed;
}

// Stage s's op is over at `now`: its output goes to the neighbour it feeds.
void finish_op(const std::vector<PipeStage>& stages, StageState& st, size_t s, double now, Messages& m) {
  const PipeOp& op = st.ops[st.next];
  const auto micro = static_cast<size_t>(op.micro);
  if (op.forward && s + 1 < stages.size())
    m.activations[s + 1][micro] = m.send(m.forward_free, s, now, stages[s].message_s);
  if (!op.forward && s > 0) m.gradients[s - 1][micro] = m.send(m.backward_free, s - 1, now, stages[s - 1].message_s);
  st.phase = ++st.next == st.ops.size() ? Phase::done : Phase::idle;
}

}  // namespace

double simulate_pipeline(const std::vector<PipeStage>& stages, PipeSchedule schedule, int micro_batches,
                         const std::vector<double>& host_cores) {
  const size_t p = stages.size(), micro = static_cast<size_t>(micro_batches);
  std::vector<StageState> state(p);
  for (size_t s = 0; s < p; ++s)
    state[s].ops = pipeline_ops(schedule, static_cast<int>(s), static_cast<int>(p), micro_batches);
  Messages m{std::vector<std::vector<double>>(p, std::vector<double>(micro, kUnknown)),
             std::vector<std::vector<double>>(p, std::vector<double>(micro, kUnknown)), std::vector<double>(p, 0.0),
             std::vector<double>(p, 0.0)};
  double now = 0;
  for (;;) {
    bool running = false;
    for (size_t s = 0; s < p; ++s) {
      StageState& st = state[s];
      if (st.phase != Phase::idle || input_arrival(m, st, s, p) > now) continue;
      const bool forward = st.ops[st.next].forward;
      st.phase = Phase::work;
      st.work_left = forward ? stages[s].forward_s : stages[s].backward_s;
      st.wait_left = forward ? stages[s].forward_wait_s : stages[s].backward_wait_s;
    }
    const std::vector<double> speed = speeds(stages, state, host_cores);
    double step = kUnknown;  // to the next event: an op's work or wait over, or an input in
    for (size_t s = 0; s < p; ++s) {
      const StageState& st = state[s];
      running = running || st.phase != Phase::done;
      if (st.phase == Phase::work) step = std::min(step, st.work_left / speed[s]);
      if (st.phase == Phase::wait) step = std::min(step, st.wait_left);
      if (st.phase == Phase::idle) step = std::min(step, input_arrival(m, st, s, p) - now);
    }
    if (!running) return now;
    DT_CHECK(step < kUnknown, "a simulated pipeline of {} stages and {} micro-batches waits for nothing", p, micro);
    now += step;
    for (size_t s = 0; s < p; ++s) {
      StageState& st = state[s];
      if (st.phase == Phase::work) {
        st.work_left -= step * speed[s];
        if (st.work_left > 1e-12) continue;
        st.phase = Phase::wait;
      } else if (st.phase == Phase::wait) {
        st.wait_left -= step;
      } else {
        continue;
      }
      if (st.wait_left <= 1e-12) finish_op(stages, st, s, now, m);
    }
  }
}

}  // namespace distrain
