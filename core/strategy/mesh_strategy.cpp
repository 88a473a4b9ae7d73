#include "core/strategy/mesh_strategy.hpp"

#include <optional>

#include "core/backend/backend.hpp"
#include "core/base/rng.hpp"
#include "core/comm/mesh.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/strategy/replica.hpp"
#include "core/strategy/sharded_variables.hpp"
#include "core/strategy/zero_gatherers.hpp"
#include "core/strategy/zero_reducers.hpp"

namespace distrain {

namespace {

// A whole variable from this rank's slice: the tensor group's slices, gathered and placed.
std::vector<float> gather_whole(const Variable& v, std::vector<float> mine, Communicator& tensor) {
  if (!v.slice.sliced()) return mine;
  std::vector<float> all(mine.size() * static_cast<size_t>(tensor.size())), whole(static_cast<size_t>(v.full_shape.numel()));
  tensor.all_gather(host_tensor(mine.data(), static_cast<int64_t>(mine.size())), host_tensor(all.data(), static_cast<int64_t>(all.size())));
  for (int r = 0; r < tensor.size(); ++r) {
    const std::vector<float> part(all.begin() + static_cast<int64_t>(r * mine.size()),
                                  all.begin() + static_cast<int64_t>((r + 1) * mine.size()));
    place_slice(part, v.full_shape, TensorSlice{v.slice.axis, r, v.slice.count}, whole);
  }
  return whole;
}

class MeshStrategy;

// Variables as checkpoints see them: whole, gathered over the tensor axis (every rank of
// a tensor group takes part in each read).
class MeshModelState final : public ModelState {
 public:
  explicit MeshModelState(MeshStrategy& m) : m_(m) {}
  const ParamArena& layout() const override;
  void read(int id, std::vector<float>& out) override;
  void write(int id, const std::vector<float>& in) override;

 private:
  MeshStrategy& m_;
};

// Slots as checkpoints see them: whole, as the variables they belong to.
class MeshOptimizerState final : public OptimizerState {
 public:
  explicit MeshOptimizerState(MeshStrategy& m) : m_(m) {}
  std::string type() const override;
  int64_t iterations() const override;
  void set_iterations(int64_t n) override;
  std::vector<std::string> slot_names() const override;
  void read(const std::string& slot, const Variable& v, std::vector<float>& out) override;
  void write(const std::string& slot, const Variable& v, const std::vector<float>& in) override;

 private:
  MeshStrategy& m_;
};

MeshShape shape_of(const Recipe& recipe) {
  const StrategySpec& s = recipe.strategy;
  const MeshShape shape{static_cast<int>(s.mesh_data), static_cast<int>(s.mesh_tensor), static_cast<int>(s.mesh_pipeline)};
  check_mesh(shape, launcher_size(), recipe.file);  // before MPI starts
  return shape;
}

// Gradients summed over the data axis in one all-reduce; or, with the optimizer state
// sharded there (ZeRO-1), reduce-scattered, each data rank updating its shard of the
// values, which are all-gathered back.
ModelSeams data_axis_seams(bool shard_optimizer, Communicator& data) {
  if (shard_optimizer) return ModelSeams{std::make_unique<GatherUpdates>(data), std::make_unique<ScatterAtFlush>(data)};
  return ModelSeams{nullptr, std::make_unique<AllReduceAtFlush>(data)};
}

class MeshStrategy final : public Strategy {
 public:
  explicit MeshStrategy(const Recipe& recipe)
      : spec_(recipe.strategy), shape_(shape_of(recipe)), world_(std::make_unique<MpiCommunicator>()),
        mesh_(Mesh::over_mpi(shape_, *world_)), model_state_(*this), optimizer_state_(*this) {
    world_->set_timeout(spec_.timeout_seconds);
    device_ = Device::parse(spec_.devices.at(0), recipe.file + ": strategy.devices");
    replica_ = std::make_unique<Replica>(recipe, backend_for(device_), data_axis_seams(spec_.shard_optimizer, data()), &tensor());
    if (spec_.shard_optimizer) shards_ = ShardLayout(model().trainable_ranges(), shape_.data);
    optimizer_ = make_optimizer(recipe.optimizer);
    optimizer_->bind(replica_->backend(), model().gatherer().own().numel());
  }

  std::string name() const override { return "mesh"; }
  int num_replicas() const override { return shape_.data; }  // slices of the batch
  int rank() const override { return world_->rank(); }
  int workers() const override { return world_->size(); }
  int first_local_replica() const override { return mesh_.coord().data; }
  int local_replicas() const override { return 1; }
  std::string describe() const override {
    return fmt::format("mesh: {} ({} ranks, one {} each; tensor innermost){}", shape_.str(), shape_.size(), device_.str(),
                       spec_.shard_optimizer ? "; optimizer state sharded over the data axis (ZeRO-1)" : "");
  }
  Model& model() override { return replica_->model(); }
  Optimizer& optimizer() override { return *optimizer_; }
  ModelState& model_state() override { return model_state_; }
  OptimizerState& optimizer_state() override { return optimizer_state_; }
  Communicator& tensor() const { return mesh_.axis(Axis::tensor); }
  Communicator& data() const { return mesh_.axis(Axis::data); }
  CommTraffic data_traffic() const override { return data().traffic(); }
  CommTraffic tensor_traffic() const override { return tensor().traffic(); }
  TrafficTheory traffic_theory() override {
    return spec_.shard_optimizer ? gradient_traffic("reduce_scatter + all_gather", 2, shape_.data, model())
                                 : gradient_traffic("all_reduce", 2, shape_.data, model());
  }

  // Every tensor group starts from data rank 0's values, slots (unless each data rank has
  // its own shard of them) and iteration count.
  void sync_replicas() override {
    ParamArena& p = model().params();
    for (Tensor t : {p.values(), p.state()})
      if (t.numel()) data().broadcast(t, 0);
    if (!spec_.shard_optimizer)
      for (auto& [name, slot] : optimizer_->slots()) data().broadcast(slot, 0);
    double iterations = static_cast<double>(optimizer_->iterations());
    data().broadcast(host_tensor(&iterations, 1), 0);
    optimizer_->set_iterations(static_cast<int64_t>(iterations));
  }

  // Batch-norm moving statistics: the mean over the data axis (a tensor group's are equal).
  void prepare_for_read() override {
    const Tensor state = model().params().state();
    if (state.numel() == 0) return;
    data().all_reduce(state, ReduceOp::sum);
    replica_->backend().scale_shift(state, state, 1.0f / static_cast<float>(shape_.data), 0.0f);
  }

  LossStats evaluate(const Batch& batch) override {
    return sum_over_workers(replica_->evaluate(batch.replicas.at(0)), data());
  }
  int max_over_workers(int local) override { return max_over(local, *world_); }

 protected:
  // The seed depends on the data rank only: a tensor group draws the same dropout masks.
  LossStats compute_gradients(const Batch& batch, const StepInfo& info) override {
    model().zero_grads();
    if (info.skip_nonfinite) replica_->keep_state();
    const float scale = 1.0f / static_cast<float>(batch.global_count);
    const LossStats local = replica_->forward_backward(batch.replicas.at(0), scale,
                                                       derive_seed(info.seed, static_cast<uint64_t>(mesh_.coord().data)));
    return sum_over_workers(local, data());
  }
  void reduce_gradients() override { model().reducer().flush(); }
  // Ranks hold different slices (and shards): a count of ranks with a non-finite one.
  bool gradients_finite() override {
    float bad = all_finite(replica_->backend(), model().reducer().own()) ? 0.0f : 1.0f;
    world_->all_reduce(host_tensor(&bad, 1), ReduceOp::sum);
    return bad == 0.0f;
  }
  void apply_update(const StepInfo& info) override {
    Model& m = model();
    m.gatherer().before_update();
    optimizer_->update(m.gatherer().own(), m.reducer().own(), info.learning_rate);
    m.gatherer().after_update();
  }
  void discard_step() override { replica_->restore_state(); }

 private:
  friend class MeshModelState;
  friend class MeshOptimizerState;

  StrategySpec spec_;
  MeshShape shape_;
  std::unique_ptr<MpiCommunicator> world_;
  Mesh mesh_;
  Device device_;
  std::unique_ptr<Replica> replica_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<ShardLayout> shards_;  // shard_optimizer: the slots' layout over the data axis
  MeshModelState model_state_;
  MeshOptimizerState optimizer_state_;
};

const ParamArena& MeshModelState::layout() const { return m_.model().params(); }

void MeshModelState::read(int id, std::vector<float>& out) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  std::vector<float> mine(static_cast<size_t>(v.shape.numel()));
  m_.replica_->backend().download(m_.model().params().value(id), mine.data());
  out = gather_whole(v, std::move(mine), m_.tensor());
}

void MeshModelState::write(int id, const std::vector<float>& in) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  m_.replica_->backend().upload(slice_of(in, v.full_shape, v.slice).data(), m_.model().params().value(id));
}

std::string MeshOptimizerState::type() const { return m_.optimizer_->type(); }
int64_t MeshOptimizerState::iterations() const { return m_.optimizer_->iterations(); }
void MeshOptimizerState::set_iterations(int64_t n) { m_.optimizer_->set_iterations(n); }
std::vector<std::string> MeshOptimizerState::slot_names() const { return m_.optimizer_->slot_names(); }

// This rank's tensor slice of a slot: its own range, or, sharded, the pieces each data
// rank owns (zeros elsewhere) summed over the data axis, exact with one owner per element.
void MeshOptimizerState::read(const std::string& slot, const Variable& v, std::vector<float>& out) {
  std::vector<float> mine(static_cast<size_t>(v.shape.numel()), 0.0f);
  Backend& be = m_.replica_->backend();
  if (m_.shards_) {
    download_owned(be, *m_.shards_, m_.mesh_.coord().data, m_.optimizer_->slot(slot), v, mine.data());
    m_.data().all_reduce(host_tensor(mine.data(), v.shape.numel()), ReduceOp::sum);
  } else {
    be.download(m_.optimizer_->slot(slot).range(v.offset, v.shape.numel()), mine.data());
  }
  out = gather_whole(v, std::move(mine), m_.tensor());
}

void MeshOptimizerState::write(const std::string& slot, const Variable& v, const std::vector<float>& in) {
  const std::vector<float> mine = slice_of(in, v.full_shape, v.slice);
  Backend& be = m_.replica_->backend();
  if (m_.shards_)
    upload_owned(be, *m_.shards_, m_.mesh_.coord().data, mine.data(), m_.optimizer_->slot(slot), v);
  else
    be.upload(mine.data(), m_.optimizer_->slot(slot).range(v.offset, v.shape.numel()));
}

}  // namespace

std::unique_ptr<Strategy> make_mesh_strategy(const Recipe& recipe) { return std::make_unique<MeshStrategy>(recipe); }

}  // namespace distrain
