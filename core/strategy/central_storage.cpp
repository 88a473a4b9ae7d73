// central_storage (tf.distribute.experimental.CentralStorageStrategy): variables and
// optimizer state live once, on the host (CPU); replicas on the listed devices compute
// gradients, which are summed onto the host in replica order, applied there by the one
// optimizer, and the new variables copied back to every replica.
#include <fmt/ranges.h>

#include "core/backend/backend.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/optim/weight_decay.hpp"
#include "core/strategy/multi_replica.hpp"
#include "core/strategy/replica_mesh.hpp"

namespace distrain {

namespace {

class CentralStorage final : public MultiReplicaStrategy {
 public:
  CentralStorage(const Recipe& recipe, ReplicaMesh mesh)
      : MultiReplicaStrategy(recipe, std::move(mesh)), host_(backend_for(Device{DeviceType::cpu, 0})) {
    const Shape arena = replica(0).model().params().values().shape;
    values_ = Buffer(host_, arena);
    grads_ = Buffer(host_, arena);
    replica_grads_ = Buffer(host_, arena);
    optimizer_ = make_optimizer(recipe.optimizer);
    optimizer_->bind(host_, arena.numel(), decayed_ranges(model().params()));
    state_ = std::make_unique<ArenaOptimizerState>(*optimizer_, host_);
  }

  std::string name() const override { return "central_storage"; }
  std::string describe() const override {
    return fmt::format("central_storage: {} replica(s) on {}, variables and optimizer on the host{}", local_replicas(),
                       fmt::join(spec().devices, ", "), spec().sync_batch_norm ? ", sync_batch_norm" : "");
  }
  Optimizer& optimizer() override { return *optimizer_; }
  OptimizerState& optimizer_state() override { return *state_; }

  void sync_replicas() override {
    replica(0).backend().download(replica(0).model().params().values(), values_.view().data);
    copy_from_first({});
  }

 protected:
  // The host sum, replica 0 first, so the result does not depend on timing.
  void reduce_gradients() override {
    host_.fill(grads_.view(), 0.0f);
    for (int r = 0; r < local_replicas(); ++r) {
      replica(r).backend().download(replica(r).model().params().grads(), replica_grads_.view().data);
      host_.axpby(1.0f, replica_grads_.view(), 1.0f, grads_.view());
    }
  }

  ReducedGradients reduced_gradients() override { return {&host_, grads_.view()}; }

  void apply_update(const StepInfo& info) override {
    optimizer_->update(values_.view(), grads_.view(), info.learning_rate, info.gradient_scale);
    for (int r = 0; r < local_replicas(); ++r) replica(r).backend().upload(values_.view().data, replica(r).model().params().values());
  }

 private:
  Backend& host_;
  Buffer values_, grads_, replica_grads_;  // on the host: the variables, the summed and one replica's gradients
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ArenaOptimizerState> state_;
};

class CentralStorageKind final : public StrategyKind {
 public:
  std::string name() const override { return "central_storage"; }
  Processes processes() const override { return Processes::one; }
  bool replicas_may_share_a_gpu() const override { return true; }
  bool profiled() const override { return true; }
  std::unique_ptr<Strategy> make(const Recipe& recipe) const override {
    return std::make_unique<CentralStorage>(recipe, ReplicaMesh(recipe, ReplicaMesh::Workers::none));
  }
};
DT_REGISTER_STRATEGY(CentralStorageKind, 3);

}  // namespace

}  // namespace distrain
