#include "core/strategy/zero.hpp"

#include <fmt/ranges.h>

#include "core/backend/backend.hpp"
#include "core/base/range.hpp"
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

// Parameters live in shards (stage 3): reading a variable gathers it; writing keeps the
// part each local replica owns. Batch-norm state is replicated and comes from replica 0.
class ShardedModelState final : public ModelState {
 public:
  explicit ShardedModelState(Zero& z) : z_(z) {}
  const ParamArena& layout() const override;
  void read(int id, std::vector<float>& out) override;
  void write(int id, const std::vector<float>& in) override;

 private:
  Zero& z_;
};

class Zero final : public MultiReplicaStrategy {
 public:
  explicit Zero(const Recipe& recipe)
      : MultiReplicaStrategy(recipe, World::when_launched, /*full_gradients=*/recipe.strategy.zero_stage < 2,
                             /*full_values=*/recipe.strategy.zero_stage < 3),
        state_(*this),
        model_state_(*this) {
    DT_USER_CHECK(!world() || local_replicas() == 1, "{}: zero under mpirun takes one device per worker (strategy.devices), got {}",
                  recipe.file, local_replicas());
    const Model& m = replica(0).model();
    arena_ = m.params().trainable_arena_size();
    const int64_t n = num_replicas();
    shard_ = (arena_ + n - 1) / n;
    shard_ = (shard_ + ParamArena::kAlign - 1) / ParamArena::kAlign * ParamArena::kAlign;
    for (size_t i = 0; i < m.layers().size(); ++i) bucket_ = std::max(bucket_, m.trainable_range(i).second - m.trainable_range(i).first);
    for (int r = 0; r < local_replicas(); ++r) {
      Backend& be = replica(r).backend();
      optimizers_.push_back(make_optimizer(recipe.optimizer));
      optimizers_.back()->bind(be, length(first_local_replica() + r));
      if (stage() == 1) {
        send_.emplace_back(be, Shape{shard_});
        gathered_.emplace_back(be, Shape{shard_ * n});
        be.fill(send_.back().view(), 0.0f);
        continue;
      }
      shard_grads_.emplace_back(be, Shape{shard_});
      grad_buckets_.emplace_back(be, Shape{bucket_});
      Model::LayerHooks hooks{nullptr, nullptr, [this, r](size_t i) { open_gradients(r, i); },
                              [this, r](size_t i) { reduce_gradients_of(r, i); }};
      if (stage() == 3) {
        shard_values_.emplace_back(be, Shape{shard_});
        be.fill(shard_values_.back().view(), 0.0f);
        value_buckets_.emplace_back(be, Shape{bucket_});
        hooks.before_forward = [this, r](size_t i) { gather_values(r, i); };
        hooks.after_forward = [this, r](size_t) { replica(r).model().params().clear_value_window(); };
        hooks.before_backward = [this, r](size_t i) {
          gather_values(r, i);
          open_gradients(r, i);
        };
        hooks.after_backward = [this, r](size_t i) {
          replica(r).model().params().clear_value_window();
          reduce_gradients_of(r, i);
        };
      }
      replica(r).model().set_layer_hooks(std::move(hooks));
    }
  }

  std::string name() const override { return "zero"; }
  std::string describe() const override {
    const char* what[] = {"", "optimizer state", "optimizer state and gradients", "optimizer state, gradients and parameters"};
    return fmt::format("zero stage {}: {} replica(s) ({}), {} sharded in {} ranges of {} parameters", stage(), num_replicas(),
                       workers() > 1 ? fmt::format("{} MPI workers", workers()) : fmt::format("{}", fmt::join(spec().devices, ", ")),
                       what[stage()], num_replicas(), shard_);
  }
  Optimizer& optimizer() override { return *optimizers_[0]; }
  OptimizerState& optimizer_state() override { return state_; }
  ModelState& model_state() override {
    if (stage() < 3) return MultiReplicaStrategy::model_state();
    return model_state_;
  }
  MemoryUse memory_per_replica(int64_t per_replica_batch) override {
    MemoryUse m = Strategy::memory_per_replica(per_replica_batch);
    m.optimizer = static_cast<int64_t>(optimizers_[0]->slots().size()) * length(0) * 4;
    if (stage() >= 2) m.gradients = (shard_ + bucket_) * 4;  // own range + one layer's bucket
    if (stage() == 3) m.parameters = (shard_ + bucket_) * 4 + static_cast<int64_t>(model().params().state().bytes());
    return m;
  }
  // Batch-norm state (and below stage 3 the parameters) come from replica 0; each shard
  // keeps its own slots (and at stage 3 its own parameters, written through model_state()).
  void sync_replicas() override { copy_from_first({}); }

  LossStats evaluate(const Batch& batch) override {
    if (stage() < 3 || local_replicas() == 1) return MultiReplicaStrategy::evaluate(batch);
    // Every replica takes part in gathering each layer's parameters; replica 0 has the data.
    LossStats s;
    threads().run([&](int r) {
      if (r == 0) s = replica(0).evaluate(batch.replicas.at(0));
      else replica(r).evaluate(ReplicaSlice{});
    });
    return s;
  }

  // The range of the arena replica g owns: [begin(g), begin(g) + length(g)).
  int64_t begin(int g) const { return std::min(static_cast<int64_t>(g) * shard_, arena_); }
  int64_t length(int g) const { return std::min(shard_, arena_ - begin(g)); }
  Range own(int g) const { return {begin(g), begin(g) + length(g)}; }

 protected:
  LossStats compute_gradients(const Batch& batch, const StepInfo& info) override {
    for (size_t r = 0; r < shard_grads_.size(); ++r) replica(static_cast<int>(r)).backend().fill(shard_grads_[r].view(), 0.0f);
    return MultiReplicaStrategy::compute_gradients(batch, info);
  }

  // Stage 1: one all-reduce of the gradient arena. Stages 2 and 3 reduced layer by layer
  // during backward (reduce_gradients_of), so nothing is left to do.
  void reduce_gradients() override {
    if (stage() >= 2) return;
    threads().run([&](int r) { sum_over_replicas(r, replica(r).model().params().grads()); });
  }

  void apply_update(const StepInfo& info) override {
    threads().run([&](int r) {
      const auto i = static_cast<size_t>(r);
      const int g = first_local_replica() + r;
      ParamArena& p = replica(r).model().params();
      if (stage() == 3) {  // parameters stay sharded: nothing to gather
        optimizers_[i]->update(shard_values_[i].view().range(0, length(g)), shard_grads_[i].view().range(0, length(g)),
                               info.learning_rate);
        return;
      }
      Backend& be = replica(r).backend();
      const Tensor mine = p.values().range(begin(g), length(g));
      const Tensor grads = stage() == 2 ? shard_grads_[i].view().range(0, length(g)) : p.grads().range(begin(g), length(g));
      optimizers_[i]->update(mine, grads, info.learning_rate);
      if (stage() == 1) {
        be.copy(mine, send_[i].view().range(0, length(g)));
        all_replicas(r).all_gather(send_[i].view(), gathered_[i].view());
        be.copy(gathered_[i].view().range(0, arena_), p.values());
      } else {
        // Stage 2 keeps whole parameters: every replica's range reaches every replica.
        gather_range(r, 0, arena_, p.values());
      }
    });
    // At stage 3 replicas hold different shards: there is no full copy to compare.
    if (stage() < 3) maybe_check_consistency();
  }

 private:
  friend class ShardedOptimizerState;
  friend class ShardedModelState;
  int stage() const { return static_cast<int>(spec().zero_stage); }

  // out = arena range [lo, hi) assembled from the owners: each replica contributes its
  // part (zeros elsewhere) and the sum over replicas is exact.
  void gather_range(int r, int64_t lo, int64_t hi, Tensor out) {
    const int g = first_local_replica() + r;
    Backend& be = replica(r).backend();
    const auto [a, b] = intersect({lo, hi}, own(g));
    if (stage() == 3) {
      be.fill(out, 0.0f);
      if (a < b) be.copy(shard_values_[static_cast<size_t>(r)].view().range(a - begin(g), b - a), out.range(a - lo, b - a));
    } else {  // stage 2: out is the parameter arena itself; zero what others own
      if (a > lo) be.fill(out.range(0, a - lo), 0.0f);
      if (b < hi) be.fill(out.range(std::max(b, lo) - lo, hi - std::max(b, lo)), 0.0f);
    }
    sum_over_replicas(r, out);
  }

  // Stage 3, before layer i runs: its parameters, gathered into a bucket.
  void gather_values(int r, size_t layer) {
    const auto [lo, hi] = replica(r).model().trainable_range(layer);
    if (lo == hi) return;
    const Tensor bucket = value_buckets_[static_cast<size_t>(r)].view().range(0, hi - lo);
    gather_range(r, lo, hi, bucket);
    replica(r).model().params().set_value_window(lo, bucket);
  }

  // Stages 2 and 3, before layer i's backward: its gradients go to a zeroed bucket.
  void open_gradients(int r, size_t layer) {
    const auto [lo, hi] = replica(r).model().trainable_range(layer);
    if (lo == hi) return;
    const Tensor bucket = grad_buckets_[static_cast<size_t>(r)].view().range(0, hi - lo);
    replica(r).backend().fill(bucket, 0.0f);
    replica(r).model().params().set_gradient_window(lo, bucket);
  }

  // After layer i's backward: sum its bucket over replicas, keep the part in our range.
  void reduce_gradients_of(int r, size_t layer) {
    const auto [lo, hi] = replica(r).model().trainable_range(layer);
    if (lo == hi) return;
    replica(r).model().params().clear_gradient_window();
    const Tensor bucket = grad_buckets_[static_cast<size_t>(r)].view().range(0, hi - lo);
    sum_over_replicas(r, bucket);
    const int g = first_local_replica() + r;
    const auto [a, b] = intersect({lo, hi}, own(g));
    if (a < b)
      replica(r).backend().copy(bucket.range(a - lo, b - a), shard_grads_[static_cast<size_t>(r)].view().range(a - begin(g), b - a));
  }

  ShardedOptimizerState state_;
  ShardedModelState model_state_;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;  // replica r: slots for its range only
  std::vector<Buffer> send_, gathered_;                  // stage 1: (S) own range, zero padded; (S x replicas)
  std::vector<Buffer> shard_grads_, grad_buckets_;       // stages 2, 3: (S) reduced gradients of own range; (largest layer)
  std::vector<Buffer> shard_values_, value_buckets_;     // stage 3: (S) own parameters; (largest layer)
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
    const auto [lo, hi] = intersect({v.offset, v.offset + n}, z_.own(g));
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
    const auto [lo, hi] = intersect({v.offset, v.offset + n}, z_.own(g));
    if (lo >= hi) continue;
    z_.replica(r).backend().upload(
        in.data() + (lo - v.offset), slot_of(*z_.optimizers_[static_cast<size_t>(r)], slot).range(lo - z_.begin(g), hi - lo));
  }
}

}  // namespace

std::unique_ptr<Strategy> make_zero(const Recipe& recipe) { return std::make_unique<Zero>(recipe); }

}  // namespace distrain

namespace distrain {
namespace {

const ParamArena& ShardedModelState::layout() const { return z_.model().params(); }

void ShardedModelState::read(int id, std::vector<float>& out) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  if (!v.trainable) {
    out.resize(static_cast<size_t>(v.shape.numel()));
    z_.replica(0).backend().download(z_.replica(0).model().params().value(id), out.data());
    return;
  }
  const int64_t n = v.shape.numel();
  out.assign(static_cast<size_t>(n), 0.0f);
  for (int r = 0; r < z_.local_replicas(); ++r) {
    const int g = z_.first_local_replica() + r;
    const auto [lo, hi] = intersect({v.offset, v.offset + n}, z_.own(g));
    if (lo < hi)
      z_.replica(r).backend().download(z_.shard_values_[static_cast<size_t>(r)].view().range(lo - z_.begin(g), hi - lo),
                                       out.data() + (lo - v.offset));
  }
  if (z_.world()) z_.world()->all_reduce(Tensor{out.data(), Shape{n}, DType::f32, Device{}}, ReduceOp::sum);
}

void ShardedModelState::write(int id, const std::vector<float>& in) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  for (int r = 0; r < z_.local_replicas(); ++r) {
    if (!v.trainable) {
      z_.replica(r).backend().upload(in.data(), z_.replica(r).model().params().value(id));
      continue;
    }
    const int g = z_.first_local_replica() + r;
    const int64_t n = v.shape.numel();
    const auto [lo, hi] = intersect({v.offset, v.offset + n}, z_.own(g));
    if (lo < hi)
      z_.replica(r).backend().upload(in.data() + (lo - v.offset),
                                     z_.shard_values_[static_cast<size_t>(r)].view().range(lo - z_.begin(g), hi - lo));
  }
}

}  // namespace
}  // namespace distrain
