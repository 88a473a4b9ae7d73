#include "core/train/step_timing.hpp"

#include "core/train/batch_source.hpp"
#include "core/train/step_loop.hpp"

namespace distrain {

namespace {

class StepTimer final : public StepObserver {
 public:
  StepTimer(Strategy& strategy, int64_t steps, int64_t per_replica_batch, LayerClock* clock)
      : strategy_(strategy), data_(strategy.data_traffic()), tensor_(strategy.tensor_traffic()), batch_(per_replica_batch),
        clock_(clock) {
    times_.reserve(static_cast<size_t>(steps));
  }
  // Every step waits for its figures, so that its time is the device's, not the launches'.
  bool needs_figures(const TrainState&) const override { return true; }
  bool after_step(const TrainState&, const StepDone& step) override {
    const CommTraffic data = strategy_.data_traffic(), tensor = strategy_.tensor_traffic();
    times_.push_back(StepTime{step.seconds * 1000.0, step.phases.reduce * 1000.0, data - data_, tensor - tensor_,
                              strategy_.stage_figures(batch_), step.phases.update * 1000.0,
                              clock_ ? clock_->take() : LayerMillis{}});
    data_ = data;
    tensor_ = tensor;
    return false;
  }
  std::vector<StepTime>& times() { return times_; }

 private:
  Strategy& strategy_;
  CommTraffic data_, tensor_;  // as the last step ended
  int64_t batch_;
  LayerClock* clock_;  // or null
  std::vector<StepTime> times_;
};

}  // namespace

std::vector<StepTime> time_steps(const Recipe& recipe, Strategy& strategy, const Batch& batch, int64_t steps,
                                 LayerClock* clock) {
  LoopPlan plan;  // one epoch of `steps` batches
  plan.batches_per_epoch = steps;
  plan.total_steps = steps;
  plan.seed = recipe.seed;
  plan.on_nonfinite = OnNonFinite::ignore;
  const LrSchedule schedule(recipe.optimizer.learning_rate, recipe.schedule, strategy.update_batch(batch.global_count), steps);
  RepeatedBatch batches(batch);
  StepTimer timer(strategy, steps, recipe.strategy.per_replica_batch, clock);
  strategy.model().set_layer_clock(clock);
  StepLoop(strategy, batches, plan, schedule, timer).run(TrainState{});
  strategy.model().set_layer_clock(nullptr);
  return std::move(timer.times());
}

}  // namespace distrain
