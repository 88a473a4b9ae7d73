#include "core/strategy/mirrored.hpp"

#include <fmt/ranges.h>

#include <deque>

#include "core/strategy/model_update.hpp"
#include "core/strategy/multi_replica.hpp"

namespace distrain {

namespace {

ModelSeams all_reduce_at_flush(Communicator& all) { return ModelSeams{nullptr, std::make_unique<AllReduceAtFlush>(all)}; }

class Mirrored final : public MultiReplicaStrategy {
 public:
  Mirrored(const Recipe& recipe, bool multi_worker, ReplicaMesh mesh)
      : MultiReplicaStrategy(recipe, std::move(mesh), all_reduce_at_flush),
        multi_worker_(multi_worker) {
    for (int r = 0; r < local_replicas(); ++r) updates_.emplace_back(recipe, replica(r).model(), replica(r).backend());
    state_ = std::make_unique<ArenaOptimizerState>(updates_[0].optimizer(), replica(0).backend());
  }

  std::string name() const override { return multi_worker_ ? "multi_worker_mirrored" : "mirrored"; }
  TrafficTheory traffic_theory() override { return gradient_traffic("all_reduce", 2, num_replicas(), model()); }
  std::string describe() const override {
    const std::string local = fmt::format("{} replica(s) on {}", local_replicas(), fmt::join(spec().devices, ", "));
    const std::string sync = spec().sync_batch_norm ? ", sync_batch_norm" : "";
    if (!multi_worker_)
      return fmt::format("mirrored: {}, cross_device_ops {} (local all-reduce){}", local, spec().cross_device_ops, sync);
    return fmt::format("multi_worker_mirrored: {} worker(s) x {}, communication {} (local all-reduce, then MPI){}",
                       workers(), local, spec().communication, sync);
  }
  Optimizer& optimizer() override { return updates_[0].optimizer(); }
  OptimizerState& optimizer_state() override { return *state_; }
  void sync_replicas() override {
    std::vector<Optimizer*> optimizers;
    for (ModelUpdate& u : updates_) optimizers.push_back(&u.optimizer());
    copy_from_first(optimizers);
  }

 protected:
  // One fused all-reduce of the whole gradient arena.
  void reduce_gradients() override {
    threads().run([&](int r) { replica(r).model().reducer().flush(); });
  }

  // Every replica applies the same update to the same values.
  void apply_update(const StepInfo& info) override {
    threads().run([&](int r) { updates_[static_cast<size_t>(r)].apply(info.learning_rate, info.gradient_scale); });
    maybe_check_consistency();
  }

 private:
  bool multi_worker_;
  std::deque<ModelUpdate> updates_;  // one per replica, kept identical
  std::unique_ptr<ArenaOptimizerState> state_;          // replica 0's; sync_replicas() spreads it
};

}  // namespace

std::unique_ptr<Strategy> make_mirrored(const Recipe& recipe, bool multi_worker, ReplicaMesh mesh) {
  return std::make_unique<Mirrored>(recipe, multi_worker, std::move(mesh));
}

}  // namespace distrain
