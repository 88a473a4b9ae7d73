#include "core/strategy/zero.hpp"

#include <fmt/ranges.h>

#include <functional>

#include "core/backend/backend.hpp"
#include "core/base/range.hpp"
#include "core/strategy/multi_replica.hpp"
#include "core/strategy/shard_layout.hpp"
#include "core/strategy/zero_gatherers.hpp"
#include "core/strategy/zero_reducers.hpp"

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
  Tensor slot(int r, const std::string& name, const Range& part);
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
  Tensor values(int r, const Range& part);
  Zero& z_;
};

// The one place the stage matters: which gatherer and reducer each replica's model gets.
MultiReplicaStrategy::SeamFactory seams_for_stage(int64_t stage) {
  return [stage](Communicator& all) {
    switch (stage) {
      case 1: return ModelSeams{std::make_unique<AllGatherUpdates>(all), std::make_unique<FusedAllReduce>(all)};
      case 2: return ModelSeams{std::make_unique<SumUpdates>(all), std::make_unique<ShardingReducer>(all)};
      default: return ModelSeams{std::make_unique<ShardGatherer>(all), std::make_unique<ShardingReducer>(all)};
    }
  };
}

class Zero final : public MultiReplicaStrategy {
 public:
  explicit Zero(const Recipe& recipe)
      : MultiReplicaStrategy(recipe, World::when_launched, seams_for_stage(recipe.strategy.zero_stage)),
        state_(*this),
        sharded_state_(*this) {
    DT_USER_CHECK(!world() || local_replicas() == 1, "{}: zero under mpirun takes one device per worker (strategy.devices), got {}",
                  recipe.file, local_replicas());
    const ParamArena& p = model().params();
    shards_ = ShardLayout(p.trainable_arena_size(), num_replicas());
    for (int r = 0; r < local_replicas(); ++r) {
      optimizers_.push_back(make_optimizer(recipe.optimizer));
      optimizers_.back()->bind(replica(r).backend(), own(first_local_replica() + r).size());
    }
    // Whole parameters (stages 1, 2) are read and written as any replicated model's, and
    // replicas must keep them equal; sharded ones (3) have no full copy to read or compare.
    whole_values_ = p.values().numel() == p.trainable_arena_size();
    model_state_ = whole_values_ ? &MultiReplicaStrategy::model_state() : &sharded_state_;
  }

  std::string name() const override { return "zero"; }
  std::string describe() const override {
    const char* what[] = {"", "optimizer state", "optimizer state and gradients", "optimizer state, gradients and parameters"};
    const int64_t stage = spec().zero_stage;
    return fmt::format("zero stage {}: {} replica(s) ({}), {} sharded in {} ranges of {} parameters", stage, num_replicas(),
                       workers() > 1 ? fmt::format("{} MPI workers", workers()) : fmt::format("{}", fmt::join(spec().devices, ", ")),
                       what[stage], num_replicas(), shards_.shard);
  }
  Optimizer& optimizer() override { return *optimizers_[0]; }
  OptimizerState& optimizer_state() override { return state_; }
  ModelState& model_state() override { return *model_state_; }
  // What the gatherer and reducer of this process's first replica hold, and slots for
  // replica 0's range.
  MemoryUse memory_per_replica(int64_t per_replica_batch) override {
    MemoryUse m = Strategy::memory_per_replica(per_replica_batch);
    Model& first = replica(0).model();
    m.optimizer = static_cast<int64_t>(optimizers_[0]->slots().size()) * own(0).size() * 4;
    m.gradients = first.reducer().bytes();
    m.parameters = first.gatherer().bytes() + static_cast<int64_t>(first.params().state().bytes());
    return m;
  }
  // Batch-norm state (and whole parameters) come from replica 0; each shard keeps its own
  // slots (and sharded parameters, written through model_state()).
  void sync_replicas() override { copy_from_first({}); }

 protected:
  // Stage 1 sums the gradient arena here; stages 2 and 3 reduced layer by layer in backward.
  void reduce_gradients() override {
    threads().run([&](int r) { replica(r).model().reducer().flush(); });
  }

  // Each replica has the reduced gradients of its own range (below stage 2 also the rest,
  // the same everywhere): a count of replicas with a non-finite one, summed over all.
  bool gradients_finite() override {
    std::vector<float> bad(static_cast<size_t>(local_replicas()));
    threads().run([&](int r) {
      const auto i = static_cast<size_t>(r);
      const Tensor mine = replica(r).model().reducer().gradients(own(first_local_replica() + r));
      bad[i] = all_finite(replica(r).backend(), mine) ? 0.0f : 1.0f;
      sum_over_replicas(r, host_tensor(&bad[i], 1));
    });
    return bad[0] == 0.0f;
  }

  // Every replica updates its own range, then the gatherer shares the update as its stage needs.
  void apply_update(const StepInfo& info) override {
    threads().run([&](int r) {
      Model& m = replica(r).model();
      const Range mine = own(first_local_replica() + r);
      optimizers_[static_cast<size_t>(r)]->update(m.gatherer().values(mine), m.reducer().gradients(mine), info.learning_rate);
      m.gatherer().after_update();
    });
    if (whole_values_) maybe_check_consistency();
  }

 private:
  friend class ShardedOptimizerState;
  friend class ShardedModelState;

  // The range of the arena replica g owns.
  Range own(int g) const { return shards_.own(g); }
  // Replica r's storage of a range it owns (a slot's, or its parameters').
  using ShardOf = std::function<Tensor(int r, const Range& part)>;
  // Trainable variable v from its owners: each local replica downloads its part, zeros
  // elsewhere, and the sum over workers is exact (one owner per element).
  void read_sharded(const Variable& v, const ShardOf& shard, std::vector<float>& out) {
    const int64_t n = v.shape.numel();
    out.assign(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < local_replicas(); ++r) {
      const Range part = intersect({v.offset, v.offset + n}, own(first_local_replica() + r));
      if (!part.empty()) replica(r).backend().download(shard(r, part), out.data() + (part.begin - v.offset));
    }
    if (world()) world()->all_reduce(Tensor{out.data(), Shape{n}, DType::f32, Device{}}, ReduceOp::sum);
  }
  // Each local replica keeps the part of v it owns.
  void write_sharded(const Variable& v, const ShardOf& shard, const std::vector<float>& in) {
    for (int r = 0; r < local_replicas(); ++r) {
      const Range part = intersect({v.offset, v.offset + v.shape.numel()}, own(first_local_replica() + r));
      if (!part.empty()) replica(r).backend().upload(in.data() + (part.begin - v.offset), shard(r, part));
    }
  }

  ShardedOptimizerState state_;
  ShardedModelState sharded_state_;
  ModelState* model_state_ = nullptr;
  std::vector<std::unique_ptr<Optimizer>> optimizers_;  // replica r: slots for its range only
  ShardLayout shards_;
  bool whole_values_ = true;
};

std::string ShardedOptimizerState::type() const { return z_.optimizers_[0]->type(); }
int64_t ShardedOptimizerState::iterations() const { return z_.optimizers_[0]->iterations(); }
void ShardedOptimizerState::set_iterations(int64_t n) {
  for (auto& o : z_.optimizers_) o->set_iterations(n);
}
std::vector<std::string> ShardedOptimizerState::slot_names() const { return z_.optimizers_[0]->slot_names(); }

// Slots are updated by the shard's owner only, so they cover the owner's range.
Tensor ShardedOptimizerState::slot(int r, const std::string& name, const Range& part) {
  const int64_t begin = z_.own(z_.first_local_replica() + r).begin;
  return z_.optimizers_[static_cast<size_t>(r)]->slot(name).range(part.begin - begin, part.size());
}

void ShardedOptimizerState::read(const std::string& slot_name, const Variable& v, std::vector<float>& out) {
  z_.read_sharded(v, [&](int r, const Range& part) { return slot(r, slot_name, part); }, out);
}

void ShardedOptimizerState::write(const std::string& slot_name, const Variable& v, const std::vector<float>& in) {
  z_.write_sharded(v, [&](int r, const Range& part) { return slot(r, slot_name, part); }, in);
}

const ParamArena& ShardedModelState::layout() const { return z_.model().params(); }

Tensor ShardedModelState::values(int r, const Range& part) { return z_.replica(r).model().gatherer().values(part); }

void ShardedModelState::read(int id, std::vector<float>& out) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  if (v.trainable) return z_.read_sharded(v, [&](int r, const Range& part) { return values(r, part); }, out);
  out.resize(static_cast<size_t>(v.shape.numel()));
  z_.replica(0).backend().download(z_.replica(0).model().params().value(id), out.data());
}

void ShardedModelState::write(int id, const std::vector<float>& in) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  if (v.trainable) return z_.write_sharded(v, [&](int r, const Range& part) { return values(r, part); }, in);
  for (int r = 0; r < z_.local_replicas(); ++r) z_.replica(r).backend().upload(in.data(), z_.replica(r).model().params().value(id));
}

}  // namespace

std::unique_ptr<Strategy> make_zero(const Recipe& recipe) { return std::make_unique<Zero>(recipe); }

}  // namespace distrain
