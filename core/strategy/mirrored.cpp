// mirrored and multi_worker_mirrored (tf.distribute.MirroredStrategy /
// MultiWorkerMirroredStrategy): every replica holds the whole model; after each
// replica's backward, one fused all-reduce sums the gradient arena and every replica
// applies the same update, so variables stay identical (checked every check_every steps).
//   mirrored               one process, one replica per listed device, threads, `local` communicator
//   multi_worker_mirrored  one process per worker under mpirun/srun, each with its listed
//                          local replicas: local all-reduce, MPI all-reduce between workers
//                          (on the first replica's thread), local broadcast
#include <fmt/ranges.h>

#include <algorithm>
#include <deque>

#include "core/io/recipe.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/strategy/model_update.hpp"
#include "core/strategy/multi_replica.hpp"
#include "core/strategy/replica_mesh.hpp"

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
      return fmt::format("mirrored: {}, cross_device_ops {} (local all-reduce){}", local, spec().mirrored.cross_device_ops, sync);
    return fmt::format("multi_worker_mirrored: {} worker(s) x {}, communication {} (local all-reduce, then MPI){}",
                       workers(), local, spec().multi_worker.communication, sync);
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

bool all_cpu(const std::vector<Device>& devices) {
  return std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cpu(); });
}

class MirroredKind final : public StrategyKind {
 public:
  std::string name() const override { return "mirrored"; }
  Processes processes() const override { return Processes::one; }
  bool replicas_may_share_a_gpu() const override { return true; }
  bool profiled() const override { return true; }
  std::vector<std::string> own_keys() const override { return {"cross_device_ops"}; }
  void parse(ConfigTable& c, StrategySpec& s, const std::vector<Device>& devices) const override {
    std::string& ops = s.mirrored.cross_device_ops;
    ops = c.get_choice("cross_device_ops", "auto", {"auto", "nccl", "hierarchical_copy", "reduce_to_one_device"});
    if (all_cpu(devices) && ops == "nccl") c.fail("cross_device_ops", "nccl needs cuda devices; on CPU devices use auto");
    if (shares_a_gpu(devices) && ops == "nccl")
      c.fail("cross_device_ops", "replicas share a GPU and NCCL refuses two ranks on one GPU; use \"hierarchical_copy\" or "
                                 "\"reduce_to_one_device\"");
  }
  std::unique_ptr<Strategy> make(const Recipe& recipe) const override {
    return std::make_unique<Mirrored>(recipe, false, ReplicaMesh(recipe, ReplicaMesh::Workers::none));
  }
};
DT_REGISTER_STRATEGY(MirroredKind, 1);

class MultiWorkerMirroredKind final : public StrategyKind {
 public:
  std::string name() const override { return "multi_worker_mirrored"; }
  Processes processes() const override { return Processes::launched; }
  bool profiled() const override { return true; }
  std::vector<std::string> own_keys() const override { return {"communication"}; }
  void parse(ConfigTable& c, StrategySpec& s, const std::vector<Device>& devices) const override {
    s.multi_worker.communication = c.get_choice("communication", "auto", {"auto", "ring", "nccl"});
    if (all_cpu(devices) && s.multi_worker.communication == "nccl")
      c.fail("communication", "nccl needs cuda devices; on CPU devices use auto or ring");
  }
  int replicas(const StrategySpec& s, int ranks) const override { return static_cast<int>(s.devices.size()) * ranks; }
  std::vector<std::string> launch_lines(const Recipe& recipe) const override {
    return {fmt::format("launch      mpirun -np N distrain train {} (one worker per process, N processes; on one host add "
                        "--oversubscribe when N exceeds its cores); the figures below are one worker's",
                        recipe.file)};
  }
  std::unique_ptr<Strategy> make(const Recipe& recipe) const override {
    return std::make_unique<Mirrored>(recipe, true, ReplicaMesh(recipe, ReplicaMesh::Workers::always));
  }
};
DT_REGISTER_STRATEGY(MultiWorkerMirroredKind, 2);

}  // namespace

}  // namespace distrain
