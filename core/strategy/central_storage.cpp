#include "core/strategy/central_storage.hpp"

#include <fmt/ranges.h>

#include "core/backend/backend.hpp"
#include "core/comm/local_communicator.hpp"
#include "core/strategy/replica_sync.hpp"

namespace distrain {

namespace {

class CentralStorage final : public Strategy {
 public:
  explicit CentralStorage(const Recipe& recipe)
      : spec_(recipe.strategy), host_(backend_for(Device{DeviceType::cpu, 0})),
        group_(std::make_shared<LocalGroup>(local_replicas())) {
    for (int r = 0; r < local_replicas(); ++r) {
      const Device d = Device::parse(spec_.devices[static_cast<size_t>(r)], recipe.file + ": strategy.devices");
      replicas_.push_back(std::make_unique<Replica>(recipe, backend_for(d)));
      comms_.push_back(std::make_unique<LocalCommunicator>(group_, r));
      if (spec_.sync_batch_norm)
        replicas_.back()->set_cross_replica_sum([this, r](Tensor values) { comms_[static_cast<size_t>(r)]->all_reduce(values, ReduceOp::sum); });
    }
    const Shape arena = replicas_[0]->model().params().values().shape;
    values_ = Buffer(host_, arena);
    grads_ = Buffer(host_, arena);
    replica_grads_ = Buffer(host_, arena);
    optimizer_ = make_optimizer(recipe.optimizer);
    optimizer_->bind(host_, arena.numel());
    state_ = std::make_unique<ArenaOptimizerState>(*optimizer_, host_);
    threads_ = std::make_unique<ReplicaThreads>(local_replicas(), std::max(1, cpu_threads() / local_replicas()), group_);
  }

  std::string name() const override { return "central_storage"; }
  int num_replicas() const override { return local_replicas(); }
  int local_replicas() const override { return static_cast<int>(spec_.devices.size()); }
  std::string describe() const override {
    return fmt::format("central_storage: {} replica(s) on {}, variables and optimizer on the host", local_replicas(),
                       fmt::join(spec_.devices, ", "));
  }
  Model& model() override { return replicas_[0]->model(); }
  OptimizerState& optimizer_state() override { return *state_; }
  Optimizer& optimizer() override { return *optimizer_; }

  void sync_replicas() override {
    Replica& first = *replicas_[0];
    first.backend().download(first.model().params().values(), values_.view().data);
    const Tensor state = first.model().params().state();
    std::vector<float> host_state(static_cast<size_t>(state.numel()));
    if (state.numel()) first.backend().download(state, host_state.data());
    for (auto& rep : replicas_) {
      rep->backend().upload(values_.view().data, rep->model().params().values());
      if (state.numel()) rep->backend().upload(host_state.data(), rep->model().params().state());
    }
  }

  void prepare_for_read() override {
    const Tensor first = replicas_[0]->model().params().state();
    if (first.numel() == 0) return;
    std::vector<float> sum(static_cast<size_t>(first.numel()), 0.0f), one(sum.size());
    for (auto& rep : replicas_) {
      rep->backend().download(rep->model().params().state(), one.data());
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += one[i];
    }
    for (float& x : sum) x /= static_cast<float>(replicas_.size());
    for (auto& rep : replicas_) rep->backend().upload(sum.data(), rep->model().params().state());
  }

  LossStats evaluate(const Batch& batch) override { return replicas_[0]->evaluate(batch.replicas.at(0)); }

 protected:
  LossStats compute_gradients(const Batch& batch, const StepInfo& info) override {
    return compute_replica_gradients(*threads_, replicas_, batch, info.seed, 0);
  }

  // The host sum, replica 0 first, so the result does not depend on timing.
  void reduce_gradients() override {
    host_.fill(grads_.view(), 0.0f);
    for (auto& rep : replicas_) {
      rep->backend().download(rep->model().params().grads(), replica_grads_.view().data);
      host_.axpby(1.0f, replica_grads_.view(), 1.0f, grads_.view());
    }
  }

  void apply_update(const StepInfo& info) override {
    optimizer_->update(values_.view(), grads_.view(), info.learning_rate);
    for (auto& rep : replicas_) rep->backend().upload(values_.view().data, rep->model().params().values());
  }

 private:
  StrategySpec spec_;
  Backend& host_;
  std::shared_ptr<LocalGroup> group_;
  std::vector<std::unique_ptr<LocalCommunicator>> comms_;  // batch-norm statistics under sync_batch_norm
  std::vector<std::unique_ptr<Replica>> replicas_;
  Buffer values_, grads_, replica_grads_;  // on the host: the variables, the summed and one replica's gradients
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ArenaOptimizerState> state_;
  std::unique_ptr<ReplicaThreads> threads_;
};

}  // namespace

std::unique_ptr<Strategy> make_central_storage(const Recipe& recipe) { return std::make_unique<CentralStorage>(recipe); }

}  // namespace distrain
