#include "core/train/step_timing.hpp"

#include "core/train/batch_source.hpp"
#include "core/train/step_loop.hpp"

namespace distrain {

namespace {

class StepTimer final : public StepObserver {
 public:
  StepTimer(Strategy& strategy, const TimingPlan& plan, int64_t per_replica_batch, LayerClock* clock)
      : strategy_(strategy), plan_(plan), data_(strategy.data_traffic()), tensor_(strategy.tensor_traffic()),
        batch_(per_replica_batch), clock_(clock) {
    times_.reserve(static_cast<size_t>(plan.warmup + plan.steps));
  }
  // Every warm-up step, then every read_every-th: the steps between run as training runs
  // them, the device ahead of the host, and share the time their window took.
  bool needs_figures(const TrainState& state) const override {
    return state.step <= plan_.warmup || (state.step - plan_.warmup) % plan_.read_every == 0;
  }
  bool after_step(const TrainState&, const StepDone& step) override {
    const CommTraffic data = strategy_.data_traffic(), tensor = strategy_.tensor_traffic();
    times_.push_back(StepTime{step.seconds * 1000.0, step.phases.reduce * 1000.0, data - data_, tensor - tensor_,
                              strategy_.stage_figures(batch_), step.phases.update * 1000.0,
                              clock_ ? clock_->take() : LayerMillis{}});
    data_ = data;
    tensor_ = tensor;
    if (step.read) share_window();
    return false;
  }
  std::vector<StepTime>& times() { return times_; }

 private:
  // The steps since the last read each take their window's mean time.
  void share_window() {
    const auto first = times_.begin() + static_cast<std::ptrdiff_t>(window_start_);
    double total = 0;
    for (auto t = first; t != times_.end(); ++t) total += t->ms;
    for (auto t = first; t != times_.end(); ++t) t->ms = total / static_cast<double>(times_.end() - first);
    window_start_ = times_.size();
  }

  Strategy& strategy_;
  TimingPlan plan_;
  CommTraffic data_, tensor_;  // as the last step ended
  int64_t batch_;
  LayerClock* clock_;  // or null
  std::vector<StepTime> times_;
  size_t window_start_ = 0;
};

}  // namespace

std::vector<StepTime> time_steps(const Recipe& recipe, Strategy& strategy, const Batch& batch, const TimingPlan& timing,
                                 LayerClock* clock) {
  DT_CHECK(timing.read_every >= 1 && timing.read_every <= StepLedger::kCapacity, "figures read every {} steps",
           timing.read_every);
  const int64_t steps = timing.warmup + timing.steps;
  LoopPlan plan = recipe_plan(recipe, steps);  // its steps as training's (clipping, micro-batches)
  plan.epochs = 1;                              // but one epoch of `steps` batches, whatever their figures
  plan.total_steps = steps;
  plan.on_nonfinite = OnNonFinite::ignore;
  const LrSchedule schedule(recipe.optimizer.learning_rate, recipe.schedule, strategy.update_batch(batch.global_count), steps);
  RepeatedBatch batches(batch);
  StepTimer timer(strategy, timing, recipe.strategy.per_replica_batch, clock);
  strategy.model().set_layer_clock(clock);
  StepLoop(strategy, batches, plan, schedule, timer).run(TrainState{});
  strategy.model().set_layer_clock(nullptr);
  return std::move(timer.times());
}

}  // namespace distrain
