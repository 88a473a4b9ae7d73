// Learning rate as a function of the optimizer step, for a given global batch:
//   peak  = table[global_batch] if the table has that batch size, else
//           learning_rate * factor(global_batch / base_batch), factor by `scaling`:
//           linear (Goyal et al. 2017), sqrt, none;
//   warm-up: step < warmup_steps -> peak * (step + 1) / warmup_steps;
//   then decay over t = step - warmup_steps:
//     none         peak
//     cosine       peak * (alpha + (1 - alpha) * (1 + cos(pi * min(t, T) / T)) / 2), T = decay_steps
//     step         peak * decay_rate ^ floor(t / decay_steps)
//     exponential  peak * decay_rate ^ (t / decay_steps)
// Steps count from 0: at(0) is the rate of the first update.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace distrain {

struct ScheduleSpec {
  int64_t base_batch = 0;          // 0: the per-replica batch (the recipe's rate is for one replica)
  std::string scaling = "linear";  // linear | sqrt | none
  int64_t warmup_steps = 0;
  std::string decay = "none";  // none | cosine | step | exponential
  int64_t decay_steps = 0;     // 0 with cosine: the steps left after warm-up
  double decay_rate = 0.1;     // step, exponential
  double alpha = 0.0;          // cosine: final rate as a fraction of the peak
  std::map<int64_t, double> table;  // global batch -> rate, overrides scaling
};

class LrSchedule {
 public:
  // total_steps: optimizer steps of the whole run (for cosine without decay_steps).
  LrSchedule(double learning_rate, const ScheduleSpec& spec, int64_t global_batch, int64_t total_steps);
  double peak() const { return peak_; }
  double at(int64_t step) const;
  // One line: how the peak was derived, warm-up and decay.
  std::string describe() const;
  // What of the schedule the run's steps never reach, in a sentence (a warm-up longer than
  // the run, a cosine decay that outlasts it); "" when the run covers it all.
  std::string unfinished() const;

 private:
  ScheduleSpec spec_;
  double base_rate_, peak_;
  int64_t global_batch_, total_steps_, decay_steps_;
  bool from_table_ = false;
};

}  // namespace distrain
