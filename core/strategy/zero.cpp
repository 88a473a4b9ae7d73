#include "core/strategy/zero.hpp"

#include <fmt/ranges.h>

#include "core/backend/backend.hpp"
#include "core/strategy/multi_replica.hpp"

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

class Zero final : public MultiReplicaStrategy {
 public:
  explicit Zero(const Recipe& recipe)
      : MultiReplicaStrategy(recipe, World::when_launched, /*full_gradients=*/recipe.strategy.zero_stage < 2), state_(*this) {
    DT_USER_CHECK(spec().zero_stage <= 2, "{}: strategy.stage = 3: sharded parameters are not implemented yet (stages 1 and 2 are)",
                  recipe.file);
    DT_USER_CHECK(!world() || local_replicas() == 1, "{}: zero under mpirun takes one device per worker (strategy.devices), got {}",
                  recipe.file, local_replicas());
    arena_ = replica(0).model().params().values().numel();
    const int64_t n = num_replicas();
    shard_ = (arena_ + n - 1) / n;
    shard_ = (shard_ + ParamArena::kAlign - 1) / ParamArena::kAlign * ParamArena::kAlign;
    for (int r = 0; r < local_replicas(); ++r) {
      Backend& be = replica(r).backend();
      optimizers_.push_back(make_optimizer(recipe.optimizer));
      optimizers_.back()->bind(be, length(first_local_replica() + r));
      send_.emplace_back(be, Shape{shard_});
      gathered_.emplace_back(be, Shape{shard_ * n});
      be.fill(send_.back().view(), 0.0f);
    }
    if (stage2()) {
      for (size_t i = 0; i < replica(0).model().layers().size(); ++i) {
        const auto [lo, hi] = replica(0).model().trainable_range(i);
        bucket_ = std::max(bucket_, hi - lo);
      }
      for (int r = 0; r < local_replicas(); ++r) {
        shard_grads_.emplace_back(replica(r).backend(), Shape{shard_});
        buckets_.emplace_back(replica(r).backend(), Shape{bucket_});
        replica(r).model().set_backward_hooks({[this, r](size_t layer) { open_bucket(r, layer); },
                                               [this, r](size_t layer) { reduce_bucket(r, layer); }});
      }
    }
  }

  std::string name() const override { return "zero"; }
  std::string describe() const override {
    return fmt::format("zero stage {}: {} replica(s) ({}), optimizer state{} sharded in {} ranges of {} parameters",
                       spec().zero_stage, num_replicas(), workers() > 1 ? fmt::format("{} MPI workers", workers()) : fmt::format("{}", fmt::join(spec().devices, ", ")),
                       stage2() ? " and gradients" : "", num_replicas(), shard_);
  }
  Optimizer& optimizer() override { return *optimizers_[0]; }
  OptimizerState& optimizer_state() override { return state_; }
  MemoryUse memory_per_replica(int64_t per_replica_batch) override {
    MemoryUse m = Strategy::memory_per_replica(per_replica_batch);
    m.optimizer = static_cast<int64_t>(optimizers_[0]->slots().size()) * length(0) * 4;
    if (stage2()) m.gradients = (shard_ + bucket_) * 4;  // own range + one layer's bucket
    return m;
  }
  // Parameters and batch-norm state come from replica 0; each shard keeps its own slots.
  void sync_replicas() override { copy_from_first({}); }

  // The range of the arena replica g owns: [begin(g), begin(g) + length(g)).
  int64_t begin(int g) const { return std::min(static_cast<int64_t>(g) * shard_, arena_); }
  int64_t length(int g) const { return std::min(shard_, arena_ - begin(g)); }

 protected:
  LossStats compute_gradients(const Batch& batch, const StepInfo& info) override {
    for (int r = 0; r < static_cast<int>(shard_grads_.size()); ++r) replica(r).backend().fill(shard_grads_[static_cast<size_t>(r)].view(), 0.0f);
    return MultiReplicaStrategy::compute_gradients(batch, info);
  }

  // Stage 1: one all-reduce of the gradient arena. Stage 2 reduced layer by layer during
  // backward (reduce_bucket), so nothing is left to do.
  void reduce_gradients() override {
    if (stage2()) return;
    threads().run([&](int r) { sum_over_replicas(r, replica(r).model().params().grads()); });
  }

  void apply_update(const StepInfo& info) override {
    threads().run([&](int r) {
      const auto i = static_cast<size_t>(r);
      const int g = first_local_replica() + r;
      Backend& be = replica(r).backend();
      ParamArena& p = replica(r).model().params();
      const Tensor mine = p.values().range(begin(g), length(g));
      const Tensor grads = stage2() ? shard_grads_[i].view().range(0, length(g)) : p.grads().range(begin(g), length(g));
      optimizers_[i]->update(mine, grads, info.learning_rate);
      be.copy(mine, send_[i].view().range(0, length(g)));
      comm(r).all_gather(send_[i].view(), gathered_[i].view());
      be.copy(gathered_[i].view().range(0, arena_), p.values());
    });
    maybe_check_consistency();
  }

 private:
  friend class ShardedOptimizerState;
  bool stage2() const { return spec().zero_stage == 2; }

  // Before layer i's backward: its gradients go to a zeroed bucket.
  void open_bucket(int r, size_t layer) {
    const auto [lo, hi] = replica(r).model().trainable_range(layer);
    if (lo == hi) return;
    const Tensor bucket = buckets_[static_cast<size_t>(r)].view().range(0, hi - lo);
    replica(r).backend().fill(bucket, 0.0f);
    replica(r).model().params().set_gradient_window(lo, bucket);
  }

  // After layer i's backward: sum the bucket over replicas, keep the part in our range.
  void reduce_bucket(int r, size_t layer) {
    const auto [lo, hi] = replica(r).model().trainable_range(layer);
    if (lo == hi) return;
    ParamArena& p = replica(r).model().params();
    p.clear_gradient_window();
    const Tensor bucket = buckets_[static_cast<size_t>(r)].view().range(0, hi - lo);
    sum_over_replicas(r, bucket);
    const int g = first_local_replica() + r;
    const int64_t a = std::max(lo, begin(g)), b = std::min(hi, begin(g) + length(g));
    if (a < b)
      replica(r).backend().copy(bucket.range(a - lo, b - a), shard_grads_[static_cast<size_t>(r)].view().range(a - begin(g), b - a));
  }
  // All replicas of the job: the threads of this process, or the MPI workers.
  Communicator& comm(int r) { return world() ? static_cast<Communicator&>(*world()) : local(r); }

  ShardedOptimizerState state_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;  // replica r: slots for its range only
  std::vector<Buffer> send_, gathered_;                  // (S) own range, zero padded; (S x replicas)
  std::vector<Buffer> shard_grads_, buckets_;            // stage 2: (S) reduced gradients of own range; (largest layer)
  int64_t arena_ = 0, shard_ = 0, bucket_ = 0;
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
    z_.replica(r).backend().download(
        slot_of(*z_.optimizers_[static_cast<size_t>(r)], slot).range(lo - z_.begin(g), hi - lo), out.data() + (lo - v.offset));
  }
  // Each element has one owner and zeros elsewhere, so the sum is exact.
  if (z_.world()) z_.world()->all_reduce(Tensor{out.data(), Shape{n}, DType::f32, Device{}}, ReduceOp::sum);
}

void ShardedOptimizerState::write(const std::string& slot, const Variable& v, const std::vector<float>& in) {
  const int64_t n = v.shape.numel();
  for (int r = 0; r < z_.local_replicas(); ++r) {
    const int g = z_.first_local_replica() + r;
    const int64_t lo = std::max(v.offset, z_.begin(g)), hi = std::min(v.offset + n, z_.begin(g) + z_.length(g));
    if (lo >= hi) continue;
    z_.replica(r).backend().upload(
        in.data() + (lo - v.offset), slot_of(*z_.optimizers_[static_cast<size_t>(r)], slot).range(lo - z_.begin(g), hi - lo));
  }
}

}  // namespace

std::unique_ptr<Strategy> make_zero(const Recipe& recipe) { return std::make_unique<Zero>(recipe); }

}  // namespace distrain
