#include "core/strategy/zero.hpp"

#include <fmt/ranges.h>

#include "core/backend/backend.hpp"
#include "core/comm/local_communicator.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/strategy/replica_sync.hpp"

namespace distrain {

namespace {

class Zero;

// Slots live in shards: reading a variable gathers its pieces from their owners.
class ShardedOptimizerState final : public OptimizerState {
 public:
  explicit ShardedOptimizerState(Zero& z) : z_(z) {}
  std::string type() const override;
  int64_t iterations() const override;
  void set_iterations(int64_t n) override;
  std::vector<std::string> slot_names() const override;
  void read(const std::string& slot, const Variable& v, std::vector<float>& out) override;
  void write(const std::string& slot, const Variable& v, const std::vector<float>& in) override;

 private:
  Zero& z_;
};

class Zero final : public Strategy {
 public:
  explicit Zero(const Recipe& recipe) : spec_(recipe.strategy), state_(*this) {
    DT_USER_CHECK(spec_.zero_stage == 1, "{}: strategy.stage = {}: only ZeRO stage 1 (sharded optimizer state) is implemented so far",
                  recipe.file, spec_.zero_stage);
    if (launcher_size() > 1) {
      DT_USER_CHECK(spec_.devices.size() == 1, "{}: zero under mpirun takes one device per worker (strategy.devices), got {}",
                    recipe.file, spec_.devices.size());
      world_ = std::make_unique<MpiCommunicator>();
      rank_ = world_->rank();
      workers_ = world_->size();
    }
    group_ = std::make_shared<LocalGroup>(local_replicas());
    for (int r = 0; r < local_replicas(); ++r) {
      const Device d = Device::parse(spec_.devices[static_cast<size_t>(r)], recipe.file + ": strategy.devices");
      replicas_.push_back(std::make_unique<Replica>(recipe, backend_for(d)));
      comms_.push_back(std::make_unique<LocalCommunicator>(group_, r));
    }
    arena_ = replicas_[0]->model().params().values().numel();
    const int64_t n = num_replicas();
    shard_ = (arena_ + n - 1) / n;
    shard_ = (shard_ + ParamArena::kAlign - 1) / ParamArena::kAlign * ParamArena::kAlign;
    for (int r = 0; r < local_replicas(); ++r) {
      Backend& be = replicas_[static_cast<size_t>(r)]->backend();
      optimizers_.push_back(make_optimizer(recipe.optimizer));
      optimizers_.back()->bind(be, length(first_local_replica() + r));
      send_.emplace_back(be, Shape{shard_});
      gathered_.emplace_back(be, Shape{shard_ * n});
      be.fill(send_.back().view(), 0.0f);
    }
    threads_ = std::make_unique<ReplicaThreads>(local_replicas(), std::max(1, cpu_threads() / local_replicas()), group_);
  }

  std::string name() const override { return "zero"; }
  int num_replicas() const override { return local_replicas() * workers_; }
  int rank() const override { return rank_; }
  int workers() const override { return workers_; }
  int first_local_replica() const override { return rank_ * local_replicas(); }
  int local_replicas() const override { return static_cast<int>(spec_.devices.size()); }
  std::string describe() const override {
    return fmt::format("zero stage 1: {} replica(s) ({}), optimizer state sharded in {} ranges of {} parameters",
                       num_replicas(), world_ ? fmt::format("{} MPI workers", workers_) : fmt::format("{}", fmt::join(spec_.devices, ", ")),
                       num_replicas(), shard_);
  }
  Model& model() override { return replicas_[0]->model(); }
  Optimizer& optimizer() override { return *optimizers_[0]; }
  OptimizerState& optimizer_state() override { return state_; }
  MemoryUse memory_per_replica(int64_t per_replica_batch) override {
    MemoryUse m = Strategy::memory_per_replica(per_replica_batch);
    m.optimizer = static_cast<int64_t>(optimizers_[0]->slots().size()) * length(0) * 4;
    return m;
  }

  void sync_replicas() override {
    // Parameters and batch-norm state come from replica 0; each shard keeps its own slots.
    ParamArena& first = replicas_[0]->model().params();
    if (world_) {
      world_->broadcast(first.values(), 0);
      if (first.state().numel()) world_->broadcast(first.state(), 0);
    }
    for (int r = 1; r < local_replicas(); ++r) {
      ParamArena& p = replicas_[static_cast<size_t>(r)]->model().params();
      replicas_[static_cast<size_t>(r)]->backend().copy(first.values(), p.values());
      if (first.state().numel()) replicas_[static_cast<size_t>(r)]->backend().copy(first.state(), p.state());
    }
  }

  void prepare_for_read() override {
    threads_->run([&](int r) {
      Tensor state = replicas_[static_cast<size_t>(r)]->model().params().state();
      if (state.numel() == 0) return;
      comm(r).all_reduce(state, ReduceOp::sum);
      replicas_[static_cast<size_t>(r)]->backend().scale_shift(state, state, 1.0f / static_cast<float>(num_replicas()), 0.0f);
    });
  }

  LossStats evaluate(const Batch& batch) override {
    LossStats s = replicas_[0]->evaluate(batch.replicas.at(0));
    return world_ ? sum_over_workers(s, *world_) : s;
  }

  // The range of the arena replica g owns: [begin(g), begin(g) + length(g)).
  int64_t begin(int g) const { return std::min(static_cast<int64_t>(g) * shard_, arena_); }
  int64_t length(int g) const { return std::min(shard_, arena_ - begin(g)); }

 protected:
  LossStats compute_gradients(const Batch& batch, const StepInfo& info) override {
    const LossStats local = compute_replica_gradients(*threads_, replicas_, batch, info.seed, first_local_replica());
    return world_ ? sum_over_workers(local, *world_) : local;
  }

  void reduce_gradients() override {
    threads_->run([&](int r) { comm(r).all_reduce(replicas_[static_cast<size_t>(r)]->model().params().grads(), ReduceOp::sum); });
  }

  void apply_update(const StepInfo& info) override {
    threads_->run([&](int r) {
      const auto i = static_cast<size_t>(r);
      const int g = first_local_replica() + r;
      Backend& be = replicas_[i]->backend();
      ParamArena& p = replicas_[i]->model().params();
      const Tensor mine = p.values().range(begin(g), length(g));
      optimizers_[i]->update(mine, p.grads().range(begin(g), length(g)), info.learning_rate);
      be.copy(mine, send_[i].view().range(0, length(g)));
      comm(r).all_gather(send_[i].view(), gathered_[i].view());
      be.copy(gathered_[i].view().range(0, arena_), p.values());
    });
    ++steps_;
    if (spec_.check_every > 0 && steps_ % spec_.check_every == 0) {
      std::vector<double> sums(static_cast<size_t>(num_replicas()), 0.0);
      threads_->run([&](int r) { sums[static_cast<size_t>(first_local_replica() + r)] = checksum(replicas_[static_cast<size_t>(r)]->model()); });
      if (world_) world_->all_reduce_f64(sums.data(), static_cast<int>(sums.size()));
      check_checksums(sums, local_replicas(), steps_);
    }
  }

 private:
  friend class ShardedOptimizerState;
  Communicator& comm(int r) { return world_ ? static_cast<Communicator&>(*world_) : *comms_[static_cast<size_t>(r)]; }

  StrategySpec spec_;
  ShardedOptimizerState state_;
  std::unique_ptr<MpiCommunicator> world_;
  int rank_ = 0, workers_ = 1;
  std::shared_ptr<LocalGroup> group_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<std::unique_ptr<LocalCommunicator>> comms_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;  // replica r: slots for its range only
  std::vector<Buffer> send_, gathered_;                  // (S) own range, zero padded; (S x replicas)
  std::unique_ptr<ReplicaThreads> threads_;
  int64_t arena_ = 0, shard_ = 0, steps_ = 0;
};

std::string ShardedOptimizerState::type() const { return z_.optimizers_[0]->type(); }
int64_t ShardedOptimizerState::iterations() const { return z_.optimizers_[0]->iterations(); }
void ShardedOptimizerState::set_iterations(int64_t n) {
  for (auto& o : z_.optimizers_) o->set_iterations(n);
}
std::vector<std::string> ShardedOptimizerState::slot_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : z_.optimizers_[0]->slots()) names.push_back(name);
  return names;
}

namespace {
Tensor slot_of(Optimizer& o, const std::string& name) {
  for (const auto& [n, t] : o.slots())
    if (n == name) return t;
  throw Error(fmt::format("optimizer {} has no slot '{}'", o.type(), name));
}
}  // namespace

void ShardedOptimizerState::read(const std::string& slot, const Variable& v, std::vector<float>& out) {
  const int64_t n = v.shape.numel();
  out.assign(static_cast<size_t>(n), 0.0f);
  for (int r = 0; r < z_.local_replicas(); ++r) {
    const int g = z_.first_local_replica() + r;
    const int64_t lo = std::max(v.offset, z_.begin(g)), hi = std::min(v.offset + n, z_.begin(g) + z_.length(g));
    if (lo >= hi) continue;
    z_.replicas_[static_cast<size_t>(r)]->backend().download(
        slot_of(*z_.optimizers_[static_cast<size_t>(r)], slot).range(lo - z_.begin(g), hi - lo), out.data() + (lo - v.offset));
  }
  // Each element has one owner and zeros elsewhere, so the sum is exact.
  if (z_.world_) z_.world_->all_reduce(Tensor{out.data(), Shape{n}, DType::f32, Device{}}, ReduceOp::sum);
}

void ShardedOptimizerState::write(const std::string& slot, const Variable& v, const std::vector<float>& in) {
  const int64_t n = v.shape.numel();
  for (int r = 0; r < z_.local_replicas(); ++r) {
    const int g = z_.first_local_replica() + r;
    const int64_t lo = std::max(v.offset, z_.begin(g)), hi = std::min(v.offset + n, z_.begin(g) + z_.length(g));
    if (lo >= hi) continue;
    z_.replicas_[static_cast<size_t>(r)]->backend().upload(
        in.data() + (lo - v.offset), slot_of(*z_.optimizers_[static_cast<size_t>(r)], slot).range(lo - z_.begin(g), hi - lo));
  }
}

}  // namespace

std::unique_ptr<Strategy> make_zero(const Recipe& recipe) { return std::make_unique<Zero>(recipe); }

}  // namespace distrain
