#include "core/strategy/mirrored.hpp"

#include <fmt/ranges.h>

#include "core/backend/backend.hpp"
#include "core/comm/local_communicator.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/strategy/replica.hpp"
#include "core/strategy/replica_sync.hpp"
#include "core/strategy/replica_threads.hpp"

namespace distrain {

namespace {

class Mirrored final : public Strategy {
 public:
  Mirrored(const Recipe& recipe, bool multi_worker)
      : multi_worker_(multi_worker), spec_(recipe.strategy), group_(std::make_shared<LocalGroup>(local_replicas())) {
    if (multi_worker_) {
      world_ = std::make_unique<MpiCommunicator>();
      rank_ = world_->rank();
      workers_ = world_->size();
    }
    for (int r = 0; r < local_replicas(); ++r) {
      const Device d = Device::parse(spec_.devices[static_cast<size_t>(r)], recipe.file + ": strategy.devices");
      replicas_.push_back(std::make_unique<Replica>(recipe, backend_for(d)));
      optimizers_.push_back(make_optimizer(recipe.optimizer));
      optimizers_.back()->bind(replicas_.back()->backend(), replicas_.back()->model().params().values().numel());
      comms_.push_back(std::make_unique<LocalCommunicator>(group_, r));
    }
    threads_ = std::make_unique<ReplicaThreads>(local_replicas(), std::max(1, cpu_threads() / local_replicas()), group_);
    state_ = std::make_unique<ArenaOptimizerState>(*optimizers_[0], replicas_[0]->backend());
    if (spec_.sync_batch_norm)
      for (int r = 0; r < local_replicas(); ++r)
        replicas_[static_cast<size_t>(r)]->set_cross_replica_sum([this, r](Tensor values) {
          LocalCommunicator& local = *comms_[static_cast<size_t>(r)];
          local.all_reduce(values, ReduceOp::sum);
          if (!world_) return;
          if (r == 0) world_->all_reduce(values, ReduceOp::sum);
          local.broadcast(values, 0);
        });
  }

  std::string name() const override { return multi_worker_ ? "multi_worker_mirrored" : "mirrored"; }
  int num_replicas() const override { return local_replicas() * workers_; }
  int rank() const override { return rank_; }
  int workers() const override { return workers_; }
  int first_local_replica() const override { return rank_ * local_replicas(); }
  int local_replicas() const override { return static_cast<int>(spec_.devices.size()); }
  std::string describe() const override {
    const std::string local = fmt::format("{} replica(s) on {}", local_replicas(), fmt::join(spec_.devices, ", "));
    if (!multi_worker_)
      return fmt::format("mirrored: {}, cross_device_ops {} (local all-reduce){}", local, spec_.cross_device_ops,
                         spec_.sync_batch_norm ? ", sync_batch_norm" : "");
    return fmt::format("multi_worker_mirrored: {} worker(s) x {}, communication {} (local all-reduce, then MPI)", workers_,
                       local, spec_.communication);
  }
  Model& model() override { return replicas_[0]->model(); }
  OptimizerState& optimizer_state() override { return *state_; }
  Optimizer& optimizer() override { return *optimizers_[0]; }

  void sync_replicas() override {
    if (world_) broadcast_from_first(*replicas_[0], *optimizers_[0], *world_);
    for (int r = 1; r < local_replicas(); ++r) copy_replica(*replicas_[0], *optimizers_[0], *replicas_[static_cast<size_t>(r)],
                                                            *optimizers_[static_cast<size_t>(r)]);
  }

  void prepare_for_read() override {
    threads_->run([&](int r) {
      Tensor state = replicas_[static_cast<size_t>(r)]->model().params().state();
      if (state.numel() == 0) return;
      comms_[static_cast<size_t>(r)]->all_reduce(state, ReduceOp::sum);
      if (r == 0 && world_) world_->all_reduce(state, ReduceOp::sum);
      comms_[static_cast<size_t>(r)]->broadcast(state, 0);
      replicas_[static_cast<size_t>(r)]->backend().scale_shift(state, state, 1.0f / static_cast<float>(num_replicas()), 0.0f);
    });
  }

  LossStats evaluate(const Batch& batch) override {
    LossStats s = replicas_[0]->evaluate(batch.replicas.at(0));
    return world_ ? sum_over_workers(s, *world_) : s;
  }

 protected:
  LossStats compute_gradients(const Batch& batch, const StepInfo& info) override {
    const LossStats local = compute_replica_gradients(*threads_, replicas_, batch, info.seed, first_local_replica());
    return world_ ? sum_over_workers(local, *world_) : local;
  }

  void reduce_gradients() override {
    threads_->run([&](int r) {
      Tensor grads = replicas_[static_cast<size_t>(r)]->model().params().grads();
      LocalCommunicator& local = *comms_[static_cast<size_t>(r)];
      local.all_reduce(grads, ReduceOp::sum);
      if (!world_) return;
      if (r == 0) world_->all_reduce(grads, ReduceOp::sum);  // the caller's thread: MPI_THREAD_FUNNELED
      local.broadcast(grads, 0);
    });
  }

  void apply_update(const StepInfo& info) override {
    threads_->run([&](int r) {
      ParamArena& p = replicas_[static_cast<size_t>(r)]->model().params();
      optimizers_[static_cast<size_t>(r)]->update(p.values(), p.grads(), info.learning_rate);
    });
    ++steps_;
    if (spec_.check_every > 0 && steps_ % spec_.check_every == 0) check_consistency();
  }

 private:
  void check_consistency() {
    std::vector<double> sums(static_cast<size_t>(num_replicas()), 0.0);
    threads_->run([&](int r) {
      sums[static_cast<size_t>(first_local_replica() + r)] = checksum(replicas_[static_cast<size_t>(r)]->model());
    });
    if (world_) world_->all_reduce_f64(sums.data(), static_cast<int>(sums.size()));  // each slot has one writer
    check_checksums(sums, local_replicas(), steps_);
  }

  bool multi_worker_;
  StrategySpec spec_;
  std::shared_ptr<LocalGroup> group_;
  std::unique_ptr<MpiCommunicator> world_;
  int rank_ = 0, workers_ = 1;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;
  std::vector<std::unique_ptr<LocalCommunicator>> comms_;
  std::unique_ptr<ReplicaThreads> threads_;
  std::unique_ptr<ArenaOptimizerState> state_;  // of replica 0; sync_replicas() spreads it
  int64_t steps_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_mirrored(const Recipe& recipe, bool multi_worker) {
  return std::make_unique<Mirrored>(recipe, multi_worker);
}

}  // namespace distrain
