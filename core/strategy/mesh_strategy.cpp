#include "core/strategy/mesh_strategy.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>

#include "core/backend/backend.hpp"
#include "core/backend/cuda_plugin.hpp"
#include "core/base/rng.hpp"
#include "core/comm/mesh.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/model/no_storage.hpp"
#include "core/model/stage_partition.hpp"
#include "core/strategy/model_update.hpp"
#include "core/strategy/replica.hpp"
#include "core/strategy/sharded_variables.hpp"
#include "core/strategy/zero_gatherers.hpp"
#include "core/strategy/zero_reducers.hpp"

namespace distrain {

namespace {

// A whole variable from this rank's slice: the tensor group's slices, gathered and placed.
std::vector<float> gather_whole(const Variable& v, std::vector<float> mine, Communicator& tensor) {
  if (!v.slice.sliced()) return mine;
  // A vocabulary's slices may differ by a row: each travels padded to the largest.
  auto elements = [&](int r) { return slice_shape(v.full_shape, TensorSlice{v.slice.axis, r, v.slice.count, v.slice.groups}).numel(); };
  int64_t largest = 0;
  for (int r = 0; r < tensor.size(); ++r) largest = std::max(largest, elements(r));
  mine.resize(static_cast<size_t>(largest), 0.0f);
  std::vector<float> all(static_cast<size_t>(largest * tensor.size())), whole(static_cast<size_t>(v.full_shape.numel()));
  tensor.all_gather(host_tensor(mine.data(), largest), host_tensor(all.data(), static_cast<int64_t>(all.size())));
  for (int r = 0; r < tensor.size(); ++r) {
    const auto from = all.begin() + r * largest;
    TensorSlice theirs = v.slice;
    theirs.index = r;
    place_slice(std::vector<float>(from, from + elements(r)), v.full_shape, theirs, whole);
  }
  return whole;
}

class MeshStrategy;

// A GPU rank's mesh. MPI and thread communicators move host memory, so its activations and
// gradients go through host copies; over MPI, where no two ranks of the job share a GPU
// (which NCCL refuses), the data and tensor axes' collectives run on NCCL over each axis's
// ranks instead. The pipeline axis moves messages and host figures only: no NCCL there.
Mesh gpu_mesh(const Mesh& mesh, const Device& device) {
  Backend& gpu = backend_for(device);
  Mesh::Axes nccl;
  MpiCommunicator* world = mesh.mpi_world();
  if (world && !world->any_equal_on_a_host(cuda_plugin().pci_location(device.index)))
    for (Axis a : {Axis::data, Axis::tensor})
      if (mesh.shape().degree(a) > 1) nccl[static_cast<size_t>(a)] = cuda_plugin().nccl_world(*mesh.mpi_axis(a), gpu);
  return mesh.staged(HostStaging(gpu), StagedCommunicator::Staged::gpu_tensors, nccl);
}

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
  return MeshShape{static_cast<int>(s.mesh.data), static_cast<int>(s.mesh.tensor), static_cast<int>(s.mesh.pipeline)};
}

// Gradients summed over the data axis in one all-reduce; or, with the optimizer state
// sharded there (ZeRO-1), reduce-scattered, each data rank updating its shard of the
// values, which are all-gathered back. Under bf16 that shard is a float32 master (in host
// memory with offload_optimizer) and the whole values are its bf16 rounding, as zero's
// (sharded_masters).
ModelSeams data_axis_seams(const Recipe& recipe, Communicator& data) {
  if (!recipe.strategy.mesh.shard_optimizer) return ModelSeams{nullptr, std::make_unique<AllReduceAtFlush>(data)};
  const ShardedValues how{sharded_masters(recipe), sharded_masters(recipe) && recipe.strategy.mesh.offload_optimizer};
  return ModelSeams{std::make_unique<GatherUpdates>(data, how), std::make_unique<ScatterAtFlush>(data)};
}

class MeshStrategy final : public Strategy {
 public:
  MeshStrategy(const Recipe& recipe, Mesh mesh)
      : spec_(recipe.strategy), shape_(mesh.shape()), mesh_(std::move(mesh)), model_state_(*this), optimizer_state_(*this) {
    DT_CHECK(shape_of(recipe) == shape_, "{}: a mesh of {} given for {}", recipe.file, shape_.str(), shape_of(recipe).str());
    device_ = mesh_rank_device(recipe);
    if (device_.is_cuda()) mesh_ = gpu_mesh(mesh_, device_);
    // The whole model's layout (what checkpoints hold) and its cut into stages.
    layout_ = std::make_unique<Model>(recipe.model(), backend_for(Device{}), storage_free_seams(),
                                      tensor_group_of(recipe, mesh_.coord().tensor, shape_.tensor));
    plan_ = plan_stages(*layout_, shape_.pipeline, spec_.mesh.stage_boundaries, recipe.file);
    for (size_t i = 0; i < layout_->layers().size(); ++i) stage_of_layer_[layout_->layers()[i]->name()] = plan_.stage_of(i);
    find_cross_stage_ties();
    const StagePlace place{plan_.part(stage()), stage(), shape_.pipeline, static_cast<int>(spec_.mesh.micro_batches),
                           parse_pipe_schedule(spec_.mesh.schedule), shape_.pipeline > 1 ? &pipe() : nullptr};
    stage_ = std::make_unique<Replica>(recipe, backend_for(device_), data_axis_seams(recipe, data()),
                                       &tensor(), place);
    stats_ = Buffer(stage_->backend(), Shape{2});
    if (spec_.mesh.shard_optimizer) shards_ = ShardLayout(model().trainable_ranges(), shape_.data);
    update_.emplace(recipe, model(), stage_->backend(), shards_ ? &*shards_ : nullptr, mesh_.coord().data);
  }

  std::string name() const override { return "mesh"; }
  int num_replicas() const override { return shape_.data; }  // slices of the batch
  int rank() const override { return mesh_.rank(); }
  int workers() const override { return shape_.size(); }
  int first_local_replica() const override { return mesh_.coord().data; }
  int eval_shares() const override { return shape_.data; }
  int eval_share() const override { return mesh_.coord().data; }
  int local_replicas() const override { return 1; }
  std::string describe() const override {
    std::string pipeline;
    if (shape_.pipeline > 1)
      pipeline = fmt::format("; {} stages, {} micro-batch(es), schedule {}", shape_.pipeline, spec_.mesh.micro_batches, spec_.mesh.schedule);
    else if (spec_.mesh.micro_batches > 1)
      pipeline = fmt::format("; {} micro-batches", spec_.mesh.micro_batches);
    return fmt::format("mesh: {} ({} ranks, each on {}; tensor innermost){}{}{}", shape_.str(), shape_.size(), mesh_devices(spec_),
                       spec_.mesh.shard_optimizer ? "; optimizer state sharded over the data axis (ZeRO-1)" : "", pipeline,
                       exchanges());
  }
  // On GPUs, what carries each axis's exchanges (axes of more than one rank).
  std::string exchanges() const {
    if (!device_.is_cuda()) return "";
    std::string out;
    for (Axis a : kMeshAxes)
      if (shape_.degree(a) > 1) out += fmt::format("; {}: {}", axis_name(a), mesh_.axis(a).backend_name());
    return out;
  }
  // This rank's stage's model (its layers and variables only).
  Model& model() override { return stage_->model(); }
  Optimizer& optimizer() override { return update_->optimizer(); }
  ModelState& model_state() override { return model_state_; }
  OptimizerState& optimizer_state() override { return optimizer_state_; }
  Communicator& tensor() const { return mesh_.axis(Axis::tensor); }
  Communicator& data() const { return mesh_.axis(Axis::data); }
  Communicator& pipe() const { return mesh_.axis(Axis::pipeline); }
  Communicator& world() const { return mesh_.world(); }
  int stage() const { return mesh_.coord().pipeline; }
  // Each rank's idle share summed over the job, then the mean of its stage's ranks; the
  // activation bytes from one rank per stage. One all-reduce of [idle..., bytes...].
  std::vector<StageFigures> stage_figures(int64_t per_replica_batch) override {
    if (shape_.pipeline == 1) return {};
    const auto p = static_cast<size_t>(shape_.pipeline), s = static_cast<size_t>(stage());
    std::vector<double> sums(2 * p, 0.0);
    sums[s] = stage_->step_seconds() > 0 ? stage_->idle_seconds() / stage_->step_seconds() : 0.0;
    if (mesh_.coord().data == 0 && mesh_.coord().tensor == 0)
      sums[p + s] = static_cast<double>(stage_->activation_bytes(per_replica_batch));
    world().all_reduce(host_tensor(sums.data(), static_cast<int64_t>(2 * p)), ReduceOp::sum);
    std::vector<StageFigures> figures;
    for (size_t st = 0; st < p; ++st)
      figures.push_back({sums[st] / (shape_.data * shape_.tensor), static_cast<int64_t>(sums[p + st])});
    return figures;
  }
  double stage_idle_theory() const override {
    const double p = shape_.pipeline, m = static_cast<double>(spec_.mesh.micro_batches);
    return (p - 1) / (m + p - 1);
  }
  MemoryUse memory_per_replica(int64_t per_replica_batch) override {
    MemoryUse m = Strategy::memory_per_replica(per_replica_batch);
    m.activations = stage_->activation_bytes(per_replica_batch);
    return m;
  }
  CommTraffic data_traffic() const override { return data().traffic(); }
  CommTraffic tensor_traffic() const override { return tensor().traffic(); }
  TrafficTheory traffic_theory() override {
    if (!spec_.mesh.shard_optimizer) return gradient_traffic("all_reduce", 2, shape_.data, model());
    return masters() ? gradient_traffic("reduce_scatter + all_gather in bf16", 1.5, shape_.data, model())
                     : gradient_traffic("reduce_scatter + all_gather", 2, shape_.data, model());
  }

  // Every tensor group starts from data rank 0's values, slots (unless each data rank has
  // its own shard of them) and iteration count.
  void sync_replicas() override {
    ParamArena& p = model().params();
    for (Tensor t : {p.values(), p.state()})
      if (t.numel()) data().broadcast(t, 0);
    if (!spec_.mesh.shard_optimizer)
      for (auto& [name, slot] : optimizer().slots()) data().broadcast(slot, 0);
    double iterations = static_cast<double>(optimizer().iterations());
    data().broadcast(host_tensor(&iterations, 1), 0);
    optimizer().set_iterations(static_cast<int64_t>(iterations));
  }

  // Batch-norm moving statistics: the mean over the data axis (a tensor group's are equal).
  void prepare_for_read() override {
    const Tensor state = model().params().state();
    if (state.numel() == 0) return;
    data().all_reduce(state, ReduceOp::sum);
    stage_->backend().scale_shift(state, state, 1.0f / static_cast<float>(shape_.data), 0.0f);
  }

  LossStats evaluate(const Batch& batch) override { return from_last_stage(stage_->evaluate(batch.replicas.at(0))); }
  int max_over_workers(int local) override { return max_over(local, world()); }
  void sum_figures_over_workers(std::vector<double>& v) override {
    world().all_reduce(host_tensor(v.data(), static_cast<int64_t>(v.size())), ReduceOp::sum);
  }

 protected:
  // The seed depends on the data rank only: a tensor group draws the same dropout masks.
  // Its losses are summed over the mesh as the step runs (the stages exchange them anyway).
  void compute_gradients(const Batch& batch, const StepInfo& info) override {
    model().zero_grads();
    if (info.skip_nonfinite) stage_->keep_state();
    const ReplicaSlice& slice = batch.replicas.at(0);
    const float scale = 1.0f / static_cast<float>(batch.global_labels());
    stage_->forward_backward(slice, scale, derive_seed(info.seed, static_cast<uint64_t>(mesh_.coord().data)), stats_.view());
    float sums[2];
    stage_->backend().download(stats_.view(), sums);
    const int64_t labels = stage_->last() ? static_cast<int64_t>(slice.labels.size()) : 0;
    ledger().record_losses(from_last_stage(LossStats{sums[0], static_cast<int64_t>(sums[1]), labels}));
  }
  void reduce_gradients() override {
    sum_cross_stage_ties();
    model().sum_sequence_shard_gradients(tensor());
    model().reducer().flush();
  }
  // Ranks hold different slices (and shards): a count of ranks with a non-finite one.
  bool gradients_finite() override {
    float bad = all_finite(stage_->backend(), model().reducer().own()) ? 0.0f : 1.0f;
    world().all_reduce(host_tensor(&bad, 1), ReduceOp::sum);
    return bad == 0.0f;
  }
  void apply_update(const StepInfo& info) override { update_->apply(info.learning_rate, info.gradient_scale); }
  void discard_step() override { stage_->restore_state(); }
  // The global norm's square: every element of the whole model's reduced gradient once. A
  // stage counts its own variables (not a tied copy of another stage's); a tensor group
  // its slices, and a whole variable on its rank 0 only; the data axis each shard once, or
  // (replicated) data rank 0's.
  double gradient_sum_of_squares() override {
    const Tensor own = model().reducer().own();
    const int data_rank = mesh_.coord().data;
    double sum = 0;
    for (const Variable& v : model().params().variables()) {
      if (!v.trainable || owner_of(v) != stage() || (!v.slice.sliced() && mesh_.coord().tensor != 0)) continue;
      const Range r{v.offset, v.offset + v.shape.numel()};
      if (shards_)
        for (const Range& s : shards_->in_shard({r}, data_rank)) sum += sum_of_squares(stage_->backend(), own.range(s.begin, s.size()));
      else if (data_rank == 0)
        sum += sum_of_squares(stage_->backend(), own.range(r.begin, r.size()));
    }
    world().all_reduce(host_tensor(&sum, 1), ReduceOp::sum);
    return sum;
  }

 private:
  friend class MeshModelState;
  friend class MeshOptimizerState;

  // The last stage's sums over the data axis, on every stage.
  LossStats from_last_stage(const LossStats& local) {
    LossStats total = sum_over_workers(local, data());
    if (shape_.pipeline == 1) return total;
    double v[3] = {total.loss_sum, static_cast<double>(total.correct), static_cast<double>(total.count)};
    pipe().broadcast(host_tensor(v, 3), shape_.pipeline - 1);
    return LossStats{v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2])};
  }
  // bf16 under shard_optimizer: the values are float32 masters sharded over the data axis
  // (the gatherer's own()), not whole values in the arena.
  bool masters() { return model().gatherer().binding() == Binding::rounded_copy; }
  // Variable `mine` (of this stage's model) from a tensor sharded over the data axis: the
  // pieces this data rank owns, zeros elsewhere, summed over the data axis (exact: one
  // owner per element).
  std::vector<float> from_data_shards(const Tensor& sharded, const Variable& mine) {
    std::vector<float> part(static_cast<size_t>(mine.shape.numel()), 0.0f);
    download_owned(backend_for(sharded.device), *shards_, mesh_.coord().data, sharded, mine, part.data());
    data().all_reduce(host_tensor(part.data(), mine.shape.numel()), ReduceOp::sum);
    return part;
  }
  // The stage holding variable v of the layout, and v in that stage's model (-1 elsewhere).
  int owner_of(const Variable& v) const { return stage_of_layer_.at(v.layer); }
  int local_id(const Variable& v) { return owner_of(v) == stage() ? model().params().find(v.layer, v.name) : -1; }
  // v in this stage's model, its own or a copy kept for a tied layer (-1: not held here).
  int held_id(const Variable& v) { return model().params().find(v.layer, v.name); }

  // The variables a layer uses on another stage than their own (a tied head on the last
  // stage, the embedding on the first): both stages hold them.
  void find_cross_stage_ties() {
    const ParamArena& whole = layout_->params();
    for (size_t i = 0; i < layout_->layers().size(); ++i)
      if (const std::optional<int> tied = layout_->layers()[i]->tied_variable()) {
        const Variable& v = whole.variables().at(static_cast<size_t>(*tied));
        if (owner_of(v) != plan_.stage_of(i)) cross_stage_ties_.push_back(*tied);
      }
  }
  // The gradients of those variables summed over the pipeline axis (the stages holding
  // neither add zeros), before the data axis reduces them: both copies take the same step.
  void sum_cross_stage_ties() {
    for (const int id : cross_stage_ties_) {
      const Variable& v = layout_->params().variables().at(static_cast<size_t>(id));
      std::vector<float> grad(static_cast<size_t>(v.shape.numel()), 0.0f);
      const int local = held_id(v);
      if (local >= 0) stage_->backend().download(model().params().grad(local), grad.data());
      pipe().all_reduce(host_tensor(grad.data(), v.shape.numel()), ReduceOp::sum);
      if (local >= 0) stage_->backend().upload(grad.data(), model().params().grad(local));
    }
  }
  // `whole` (v's elements) from the stage that holds v to every stage.
  void share_from_owner(const Variable& v, std::vector<float>& whole) {
    whole.resize(static_cast<size_t>(v.full_shape.numel()));
    if (shape_.pipeline > 1) pipe().broadcast(host_tensor(whole.data(), v.full_shape.numel()), owner_of(v));
  }

  StrategySpec spec_;
  MeshShape shape_;
  Mesh mesh_;
  Device device_;
  std::unique_ptr<Model> layout_;  // the whole model, no storage: checkpoints' layout
  StagePlan plan_;
  std::map<std::string, int> stage_of_layer_;
  std::vector<int> cross_stage_ties_;  // layout variable ids, see find_cross_stage_ties()
  std::unique_ptr<Replica> stage_;
  Buffer stats_;  // (2,) the last stage's loss sum and correct count
  std::optional<ModelUpdate> update_;
  std::optional<ShardLayout> shards_;  // shard_optimizer: the slots' layout over the data axis
  MeshModelState model_state_;
  MeshOptimizerState optimizer_state_;
};

const ParamArena& MeshModelState::layout() const { return m_.layout_->params(); }

// Variable `id` of the whole model: the stage holding it gathers it over its tensor axis
// and hands it to the other stages.
void MeshModelState::read(int id, std::vector<float>& out) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  if (const int local = m_.local_id(v); local >= 0) {
    const Variable& mine = m_.model().params().variables().at(static_cast<size_t>(local));
    std::vector<float> part(static_cast<size_t>(mine.shape.numel()));
    if (mine.trainable && m_.masters())
      part = m_.from_data_shards(m_.model().gatherer().own(), mine);
    else
      m_.stage_->backend().download(m_.model().params().value(local), part.data());
    out = gather_whole(mine, std::move(part), m_.tensor());
  }
  m_.share_from_owner(v, out);
}

void MeshModelState::write(int id, const std::vector<float>& in) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  const int local = m_.held_id(v);
  if (local < 0) return;  // another stage's
  const Variable& mine = m_.model().params().variables().at(static_cast<size_t>(local));
  const std::vector<float> part = slice_of(in, mine.full_shape, mine.slice);
  if (mine.trainable && m_.masters()) {
    const Tensor masters = m_.model().gatherer().own();
    upload_owned(backend_for(masters.device), *m_.shards_, m_.mesh_.coord().data, part.data(), masters, mine);
    return;
  }
  m_.stage_->backend().upload(part.data(), m_.model().params().value(local));
}

std::string MeshOptimizerState::type() const { return m_.optimizer().type(); }
int64_t MeshOptimizerState::iterations() const { return m_.optimizer().iterations(); }
void MeshOptimizerState::set_iterations(int64_t n) { m_.optimizer().set_iterations(n); }
std::vector<std::string> MeshOptimizerState::slot_names() const { return m_.optimizer().slot_names(); }

// The slot of whole-model variable v: on its stage, this rank's tensor slice (its own
// range, or, sharded, the pieces each data rank owns, zeros elsewhere, summed over the
// data axis: exact with one owner per element), gathered over the tensor axis; then
// handed to the other stages.
void MeshOptimizerState::read(const std::string& slot, const Variable& v, std::vector<float>& out) {
  if (const int local = m_.local_id(v); local >= 0) {
    const Variable& mine = m_.model().params().variables().at(static_cast<size_t>(local));
    std::vector<float> part(static_cast<size_t>(mine.shape.numel()), 0.0f);
    if (m_.shards_)
      part = m_.from_data_shards(m_.optimizer().slot(slot), mine);
    else
      m_.stage_->backend().download(m_.optimizer().slot(slot).range(mine.offset, mine.shape.numel()), part.data());
    out = gather_whole(mine, std::move(part), m_.tensor());
  }
  m_.share_from_owner(v, out);
}

void MeshOptimizerState::write(const std::string& slot, const Variable& v, const std::vector<float>& in) {
  const int local = m_.held_id(v);
  if (local < 0) return;
  const Variable& mine = m_.model().params().variables().at(static_cast<size_t>(local));
  const std::vector<float> part = slice_of(in, mine.full_shape, mine.slice);
  Backend& be = m_.stage_->backend();
  if (m_.shards_)
    upload_owned(be, *m_.shards_, m_.mesh_.coord().data, part.data(), m_.optimizer().slot(slot), mine);
  else
    be.upload(part.data(), m_.optimizer().slot(slot).range(mine.offset, mine.shape.numel()));
}

}  // namespace

bool sharded_masters(const Recipe& recipe) {
  const StrategySpec& s = recipe.strategy;
  return s.mesh.shard_optimizer && recipe.train.matmul_dtype == DType::bf16;
}

std::string mesh_devices(const StrategySpec& s) {
  return s.devices.size() == 1 ? s.devices[0] : fmt::format("its host's of {}", fmt::join(s.devices, ", "));
}

Device mesh_rank_device(const Recipe& recipe) {
  const std::vector<std::string>& devices = recipe.strategy.devices;
  size_t i = 0;
  if (devices.size() > 1) {
    const std::optional<int> local = launcher_local_rank();
    DT_USER_CHECK(local.has_value(),
                  "{}: strategy.devices lists a host's GPUs [{}], but the launcher does not say which of its host's ranks this "
                  "process is (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID); launch with mpirun or srun, or list one device",
                  recipe.file, fmt::join(devices, ", "));
    i = static_cast<size_t>(*local) % devices.size();
  }
  return Device::parse(devices.at(i), recipe.file + ": strategy.devices");
}

std::unique_ptr<Strategy> make_mesh_strategy(const Recipe& recipe) {
  check_mesh(shape_of(recipe), launcher_size(), recipe.file);  // before MPI starts
  auto world = std::make_shared<MpiCommunicator>(recipe.strategy.timeout_seconds);
  return std::make_unique<MeshStrategy>(recipe, Mesh::over_mpi(shape_of(recipe), std::move(world)));
}

std::unique_ptr<Strategy> make_mesh_strategy(const Recipe& recipe, const Mesh& mesh) {
  return std::make_unique<MeshStrategy>(recipe, mesh);
}

}  // namespace distrain
