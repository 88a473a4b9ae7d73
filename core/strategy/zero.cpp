// zero (ZeRO, Rajbhandari et al. 2020). Replica g owns the contiguous range
// [g*S, g*S + S) of the parameter arena (S = arena / replicas, rounded up to 16 floats):
//   stage 1  optimizer slots for its range only; gradients all-reduced; each replica
//            updates its range and the ranges are all-gathered to every replica;
//   stage 2  plus gradients sharded: there is no gradient arena; each layer's gradients
//            go to a bucket during its backward, are summed over replicas right after,
//            and a replica keeps only the part in its range;
//   stage 3  plus parameters sharded: there is no parameter arena; each layer's
//            parameters are gathered into a bucket just before its forward and its
//            backward and released after; the update touches only the own range.
// Each stage is a parameter gatherer and a gradient reducer given to every replica's model
// (zero_gatherers.hpp, zero_reducers.hpp); zero.cpp picks them once and otherwise does the
// same at every stage. Replicas are the listed devices (threads, `local` communicator) or,
// under mpirun/srun, one device per worker (`mpi`).
#include <fmt/ranges.h>

#include <deque>
#include <functional>

#include "core/backend/backend.hpp"
#include "core/base/range.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/strategy/model_update.hpp"
#include "core/strategy/multi_replica.hpp"
#include "core/strategy/replica_mesh.hpp"
#include "core/strategy/shard_layout.hpp"
#include "core/strategy/sharded_variables.hpp"
#include "core/strategy/zero_gatherers.hpp"
#include "core/strategy/zero_memory.hpp"
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

// The one place the stage matters: which gatherer and reducer each replica's model gets.
// Under bf16 the gatherers keep bf16 copies beside float32 masters (zero_gatherers.hpp).
MultiReplicaStrategy::SeamFactory seams_for(const Recipe& recipe) {
  const bool bf16 = recipe.train.matmul_dtype == DType::bf16;
  const ShardedValues how{bf16, bf16 && recipe.strategy.zero.offload_optimizer};
  return [stage = recipe.strategy.zero.stage, how](Communicator& all) {
    switch (stage) {
      case 1: return ModelSeams{std::make_unique<GatherUpdates>(all, how), std::make_unique<ScatterAtFlush>(all)};
      case 2: return ModelSeams{std::make_unique<GatherUpdates>(all, how), std::make_unique<ShardingReducer>(all)};
      default: return ModelSeams{std::make_unique<ShardGatherer>(all, how), std::make_unique<ShardingReducer>(all)};
    }
  };
}

class Zero final : public MultiReplicaStrategy {
 public:
  Zero(const Recipe& recipe, ReplicaMesh mesh)
      : MultiReplicaStrategy(recipe, std::move(mesh), seams_for(recipe)),
        state_(*this),
        sharded_state_(*this) {
    DT_USER_CHECK(!world() || local_replicas() == 1, "{}: zero under mpirun takes one device per worker (strategy.devices), got {}",
                  recipe.file, local_replicas());
    const ParamArena& p = model().params();
    shards_ = ShardLayout(model().trainable_ranges(), num_replicas());
    for (int r = 0; r < local_replicas(); ++r)
      updates_.emplace_back(recipe, replica(r).model(), replica(r).backend(), &shards_, first_local_replica() + r);
    // Whole parameters (stages 1, 2 in float32) are read and written as any replicated
    // model's, and replicas must keep them equal; sharded ones (3, or masters beside bf16
    // copies) have no full float32 copy to read or compare.
    whole_values_ = p.values().numel() == p.trainable_arena_size();
    model_state_ = whole_values_ ? &MultiReplicaStrategy::model_state() : &sharded_state_;
    if (model().gatherer().binding() == Binding::rounded_copy)
      masters_ = model().gatherer().host_bytes() ? " (float32 masters in host memory, bf16 copies shared)"
                                                 : " (float32 masters, bf16 copies shared)";
  }

  std::string name() const override { return "zero"; }
  std::string describe() const override {
    const char* what[] = {"", "optimizer state", "optimizer state and gradients", "optimizer state, gradients and parameters"};
    const int64_t stage = spec().zero.stage;
    return fmt::format("zero stage {}: {} replica(s) ({}), {} sharded layer by layer, {} parameters per replica{}", stage,
                       num_replicas(),
                       workers() > 1 ? fmt::format("{} MPI workers", workers()) : fmt::format("{}", fmt::join(spec().devices, ", ")),
                       what[stage], shards_.size(), masters_);
  }
  Optimizer& optimizer() override { return updates_[0].optimizer(); }
  OptimizerState& optimizer_state() override { return state_; }
  ModelState& model_state() override { return *model_state_; }
  // Stages 1 and 2 reduce-scatter gradients and all-gather updated values; stage 3 gathers
  // each layer's values twice (forward, backward) instead of once after the update. Under
  // bf16 the values move in bf16, half the bytes.
  TrafficTheory traffic_theory() override {
    const bool bf16 = model().gatherer().binding() == Binding::rounded_copy;
    const double gather = bf16 ? 0.5 : 1.0;
    const char* in = bf16 ? " in bf16" : "";
    return spec().zero.stage < 3
               ? gradient_traffic(fmt::format("reduce_scatter + all_gather{}", in), 1 + gather, num_replicas(), model())
               : gradient_traffic(fmt::format("reduce_scatter + 2 all_gather{}", in), 1 + 2 * gather, num_replicas(), model());
  }
  // Batch-norm state (and whole parameters) come from replica 0; each shard keeps its own
  // slots (and sharded parameters, written through model_state()).
  void sync_replicas() override { copy_from_first({}); }

 protected:
  // Stage 1 reduce-scatters the gradient arena here; stages 2 and 3 did it layer by layer in backward.
  void reduce_gradients() override {
    threads().run([&](int r) { replica(r).model().reducer().flush(); });
  }

  // Each replica has the reduced gradients of its shard only: a count of replicas with a
  // non-finite one, summed over all.
  bool gradients_finite() override {
    std::vector<float> bad(static_cast<size_t>(local_replicas()));
    threads().run([&](int r) {
      const auto i = static_cast<size_t>(r);
      bad[i] = all_finite(replica(r).backend(), replica(r).model().reducer().own()) ? 0.0f : 1.0f;
      sum_over_replicas(r, host_tensor(&bad[i], 1));
    });
    return bad[0] == 0.0f;
  }
  ReducedGradients reduced_gradients() override { return {}; }  // a shard each: gradients_finite() decides
  double gradient_sum_of_squares() override {
    std::vector<double> sums(static_cast<size_t>(local_replicas()));
    threads().run([&](int r) {
      const auto i = static_cast<size_t>(r);
      sums[i] = sum_of_squares(replica(r).backend(), replica(r).model().reducer().own());
      sum_over_replicas(r, host_tensor(&sums[i], 1));
    });
    return sums[0];
  }

  // Every replica updates its shard, then the gatherer shares the update as its stage needs.
  void apply_update(const StepInfo& info) override {
    threads().run([&](int r) { updates_[static_cast<size_t>(r)].apply(info.learning_rate, info.gradient_scale); });
    if (whole_values_) maybe_check_consistency();
  }

 private:
  friend class ShardedOptimizerState;
  friend class ShardedModelState;

  // Local replica r's shard (of a slot, or of its parameters).
  using ShardOf = std::function<Tensor(int r)>;
  // Trainable variable v from its owners: each local replica downloads its pieces, zeros
  // elsewhere, and the sum over workers is exact (one owner per element).
  void read_sharded(const Variable& v, const ShardOf& shard, std::vector<float>& out) {
    const int64_t n = v.shape.numel();
    out.assign(static_cast<size_t>(n), 0.0f);
    for (int r = 0; r < local_replicas(); ++r) {  // a shard may be in host memory (bf16 masters, offloaded)
      const Tensor s = shard(r);
      download_owned(backend_for(s.device), shards_, first_local_replica() + r, s, v, out.data());
    }
    if (world()) world()->all_reduce(host_tensor(out.data(), n), ReduceOp::sum);
  }
  // Each local replica keeps the pieces of v it owns.
  void write_sharded(const Variable& v, const ShardOf& shard, const std::vector<float>& in) {
    for (int r = 0; r < local_replicas(); ++r) {
      const Tensor s = shard(r);
      upload_owned(backend_for(s.device), shards_, first_local_replica() + r, in.data(), s, v);
    }
  }

  ShardedOptimizerState state_;
  ShardedModelState sharded_state_;
  ModelState* model_state_ = nullptr;
  ShardLayout shards_;
  std::deque<ModelUpdate> updates_;  // replica r: slots for its shard only
  bool whole_values_ = true;
  const char* masters_ = "";  // for describe()
};

std::string ShardedOptimizerState::type() const { return z_.optimizer().type(); }
int64_t ShardedOptimizerState::iterations() const { return z_.optimizer().iterations(); }
void ShardedOptimizerState::set_iterations(int64_t n) {
  for (ModelUpdate& u : z_.updates_) u.optimizer().set_iterations(n);
}
std::vector<std::string> ShardedOptimizerState::slot_names() const { return z_.updates_[0].optimizer().slot_names(); }

// Replica r's optimizer has slots for its shard only, laid out as the shard.
void ShardedOptimizerState::read(const std::string& slot_name, const Variable& v, std::vector<float>& out) {
  z_.read_sharded(v, [&](int r) { return z_.updates_[static_cast<size_t>(r)].optimizer().slot(slot_name); }, out);
}

void ShardedOptimizerState::write(const std::string& slot_name, const Variable& v, const std::vector<float>& in) {
  z_.write_sharded(v, [&](int r) { return z_.updates_[static_cast<size_t>(r)].optimizer().slot(slot_name); }, in);
}

const ParamArena& ShardedModelState::layout() const { return z_.model().params(); }

void ShardedModelState::read(int id, std::vector<float>& out) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  if (v.trainable) return z_.read_sharded(v, [&](int r) { return z_.replica(r).model().gatherer().own(); }, out);
  out.resize(static_cast<size_t>(v.shape.numel()));
  z_.replica(0).backend().download(z_.replica(0).model().params().value(id), out.data());
}

void ShardedModelState::write(int id, const std::vector<float>& in) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  if (v.trainable) return z_.write_sharded(v, [&](int r) { return z_.replica(r).model().gatherer().own(); }, in);
  for (int r = 0; r < z_.local_replicas(); ++r) z_.replica(r).backend().upload(in.data(), z_.replica(r).model().params().value(id));
}

class ZeroKind final : public StrategyKind {
 public:
  std::string name() const override { return "zero"; }
  Processes processes() const override { return Processes::either; }
  bool replicas_may_share_a_gpu() const override { return true; }
  std::vector<std::string> own_keys() const override { return {"stage", "offload_optimizer"}; }
  void parse(ConfigTable& c, StrategySpec& s, const std::vector<Device>&) const override {
    s.zero.stage = c.get_int("stage", 1);
    if (s.zero.stage < 1 || s.zero.stage > 3) c.fail("stage", "must be 1, 2 or 3");
    s.zero.offload_optimizer = c.get_bool("offload_optimizer", false);
  }
  std::string label(const StrategySpec& s) const override { return fmt::format("zero stage {}", s.zero.stage); }
  // Every rank's replicas, when launched.
  int replicas(const StrategySpec& s, int ranks) const override { return static_cast<int>(s.devices.size()) * ranks; }
  // Stage 1 shards only the optimizer's state: its gradients line is larger than a
  // replica's parameters, which surprises.
  std::string memory_note(const Recipe& recipe) const override {
    if (recipe.strategy.zero.stage != 1) return "";
    return "zero stage 1 shards only the optimizer state: each replica keeps whole gradients and whole parameters, and "
           "beside them its shard of the reduced gradients with a one-layer bucket for the reduce-scatter (gradients), and "
           "its shard of the updated parameters (parameters)";
  }
  bool offloads_masters(const Recipe& recipe) const override { return recipe.train.matmul_dtype == DType::bf16; }
  std::optional<MemoryUse> memory_before_build(const Recipe& recipe) const override {
    return zero_memory_per_replica(recipe, planned_replicas(recipe));
  }
  std::unique_ptr<Strategy> make(const Recipe& recipe) const override {
    return std::make_unique<Zero>(recipe, ReplicaMesh(recipe, ReplicaMesh::Workers::when_launched));
  }
};
DT_REGISTER_STRATEGY(ZeroKind, 4);

}  // namespace

}  // namespace distrain
