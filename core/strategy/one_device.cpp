// one_device: a single replica on a single device (tf.distribute.OneDeviceStrategy).
#include "core/backend/backend.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/strategy/model_update.hpp"
#include "core/strategy/replica.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

namespace {

class OneDevice final : public Strategy {
 public:
  explicit OneDevice(const Recipe& recipe)
      : device_(Device::parse(recipe.strategy.devices.at(0), recipe.file + ": strategy.devices")),
        replica_(recipe, backend_for(device_)),
        update_(recipe, replica_.model(), replica_.backend()) {
    ledger().add_source(replica_.backend());
    state_ = std::make_unique<ArenaOptimizerState>(update_.optimizer(), replica_.backend());
  }

  std::string name() const override { return "one_device"; }
  int num_replicas() const override { return 1; }
  std::string describe() const override { return "one_device on " + device_.str(); }
  Model& model() override { return replica_.model(); }
  OptimizerState& optimizer_state() override { return *state_; }
  Optimizer& optimizer() override { return update_.optimizer(); }

  LossStats evaluate(const Batch& batch) override { return replica_.evaluate(batch.replicas.at(0)); }
  bool keep_data_on_devices(const Dataset& data, DataUse use) override {
    replica_.use_device_data(use, std::make_shared<DeviceData>(replica_.backend(), data));
    return true;
  }

 protected:
  void compute_gradients(const Batch& batch, const StepInfo& info) override {
    replica_.model().zero_grads();
    if (info.skip_nonfinite) replica_.keep_state();
    const ReplicaSlice& slice = batch.replicas.at(0);
    replica_.forward_backward(slice, 1.0f / static_cast<float>(batch.global_labels()), info.seed,
                              ledger().loss_slot(0, static_cast<int64_t>(slice.labels.size())));
  }
  void reduce_gradients() override {}  // one replica: its gradients are the global ones
  ReducedGradients reduced_gradients() override { return {&replica_.backend(), replica_.model().params().grads()}; }
  void discard_step() override { replica_.restore_state(); }
  void apply_update(const StepInfo& info) override { update_.apply(info.learning_rate, info.gradient_scale); }

 private:
  Device device_;
  Replica replica_;
  ModelUpdate update_;
  std::unique_ptr<ArenaOptimizerState> state_;
};

class OneDeviceKind final : public StrategyKind {
 public:
  std::string name() const override { return "one_device"; }
  Processes processes() const override { return Processes::one; }
  bool single_device() const override { return true; }
  bool profiled() const override { return true; }
  std::unique_ptr<Strategy> make(const Recipe& recipe) const override { return std::make_unique<OneDevice>(recipe); }
};
DT_REGISTER_STRATEGY(OneDeviceKind, 0);

}  // namespace

}  // namespace distrain
