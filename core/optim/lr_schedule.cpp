#include "core/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/base/error.hpp"

namespace distrain {

LrSchedule::LrSchedule(double learning_rate, const ScheduleSpec& spec, int64_t global_batch, int64_t total_steps)
    : spec_(spec), base_rate_(learning_rate), global_batch_(global_batch), total_steps_(total_steps) {
  DT_USER_CHECK(spec.base_batch > 0, "optimizer.schedule.base_batch must be positive, got {}", spec.base_batch);
  DT_USER_CHECK(spec.warmup_steps >= 0, "optimizer.schedule.warmup_steps must be >= 0, got {}", spec.warmup_steps);
  if (auto it = spec.table.find(global_batch); it != spec.table.end()) {
    peak_ = it->second;
    from_table_ = true;
  } else {
    const double ratio = static_cast<double>(global_batch) / static_cast<double>(spec.base_batch);
    if (spec.scaling == "linear")
      peak_ = learning_rate * ratio;
    else if (spec.scaling == "sqrt")
      peak_ = learning_rate * std::sqrt(ratio);
    else if (spec.scaling == "none")
      peak_ = learning_rate;
    else
      throw UserError(fmt::format("optimizer.schedule.scaling: unknown rule '{}' (known: linear, sqrt, none)", spec.scaling));
  }
  decay_steps_ = spec.decay_steps > 0 ? spec.decay_steps : std::max<int64_t>(total_steps - spec.warmup_steps, 1);
  const bool known = spec.decay == "none" || spec.decay == "cosine" || spec.decay == "step" || spec.decay == "exponential";
  DT_USER_CHECK(known, "optimizer.schedule.decay: unknown decay '{}' (known: none, cosine, step, exponential)", spec.decay);
  DT_USER_CHECK(!(spec.decay == "step" || spec.decay == "exponential") || spec.decay_steps > 0,
                "optimizer.schedule.decay_steps must be positive with decay = \"{}\"", spec.decay);
}

double LrSchedule::at(int64_t step) const {
  if (step < spec_.warmup_steps) return peak_ * static_cast<double>(step + 1) / static_cast<double>(spec_.warmup_steps);
  const double t = static_cast<double>(step - spec_.warmup_steps);
  const double T = static_cast<double>(decay_steps_);
  if (spec_.decay == "cosine")
    return peak_ * (spec_.alpha + (1.0 - spec_.alpha) * 0.5 * (1.0 + std::cos(std::numbers::pi * std::min(t, T) / T)));
  if (spec_.decay == "step") return peak_ * std::pow(spec_.decay_rate, std::floor(t / T));
  if (spec_.decay == "exponential") return peak_ * std::pow(spec_.decay_rate, t / T);
  return peak_;
}

std::string LrSchedule::describe() const {
  std::string s = from_table_ ? fmt::format("{:g} (table entry for global batch {})", peak_, global_batch_)
                              : fmt::format("{:g} = {:g} x {} rule for global batch {} / base batch {}", peak_, base_rate_,
                                            spec_.scaling, global_batch_, spec_.base_batch);
  if (spec_.warmup_steps) s += fmt::format(", warm-up {} steps", spec_.warmup_steps);
  if (spec_.decay == "cosine" && spec_.decay_steps == 0 && total_steps_ <= spec_.warmup_steps)
    s += ", no steps left for the cosine decay";
  else if (spec_.decay != "none")
    s += fmt::format(", {} decay over {} steps", spec_.decay, decay_steps_);
  return s;
}

std::string LrSchedule::unfinished() const {
  if (total_steps_ <= 0) return "";
  const double last = at(total_steps_ - 1);
  if (spec_.warmup_steps > total_steps_)
    return fmt::format("the warm-up of {} steps is longer than the run's {} steps: the learning rate never reaches its peak "
                       "{:g} and ends at {:g}; lower optimizer.schedule.warmup_steps or raise train.steps or train.epochs",
                       spec_.warmup_steps, total_steps_, peak_, last);
  if (spec_.decay == "cosine" && spec_.warmup_steps == total_steps_)
    return fmt::format("the warm-up takes all of the run's {} steps: none is left for the cosine decay, and the learning rate "
                       "ends at its peak {:g}; lower optimizer.schedule.warmup_steps or raise train.steps or train.epochs",
                       total_steps_, peak_);
  if (spec_.decay == "cosine" && spec_.warmup_steps + decay_steps_ > total_steps_)
    return fmt::format("the cosine decay over {} steps outlasts the run's {} steps after warm-up: the learning rate ends at "
                       "{:g}, {:.0f}% of the peak {:g}; lower optimizer.schedule.decay_steps (0: the steps the run has)",
                       decay_steps_, total_steps_ - spec_.warmup_steps, last, 100.0 * last / peak_, peak_);
  return "";
}

}  // namespace distrain
