// parameter_server (tf.distribute's ParameterServerStrategy, asynchronous): ranks
// 0 .. num_ps-1 serve, the others train. The trainable arena is split into num_ps
// contiguous ranges of about equal size; server k holds range k of the variables and its
// optimizer slots. Each step a worker pulls the current parameters from every server,
// computes gradients on its own batch and pushes each server its range; a server applies
// each push as it arrives (its gradient is the mean over that worker's batch, its rate
// the schedule's for the per-worker batch).
//   staleness = s   a worker may start step t only when every worker has pushed step t-s-1
//                   (stale-synchronous); unbounded when left out (TensorFlow's default);
//   staleness = 0   synchronous: a server sums the pushes of step t from all workers (in
//                   worker order), applies them once with the global batch's rate, and
//                   serves step t+1 after: the same weights as one_device with the global batch.
// Worker 0 writes the checkpoints (gathering values and slots from the servers); every
// rank reads the newest one to resume, each server keeping its range.
#include <algorithm>

#include "core/backend/backend.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/comm/staged_communicator.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/model/no_storage.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/ps_protocol.hpp"
#include "core/strategy/ps_server.hpp"
#include "core/strategy/replica.hpp"

namespace distrain {

namespace {

class ParameterServer;

// Variables as checkpoints see them: worker 0 holds fresh values after prepare_for_read().
class PsModelState final : public ModelState {
 public:
  explicit PsModelState(ParameterServer& ps) : ps_(ps) {}
  const ParamArena& layout() const override;
  void read(int id, std::vector<float>& out) override;
  void write(int id, const std::vector<float>& in) override;

 private:
  ParameterServer& ps_;
};

// Optimizer slots live on the servers: worker 0 fetches them a variable at a time.
class PsOptimizerState final : public OptimizerState {
 public:
  explicit PsOptimizerState(ParameterServer& ps) : ps_(ps) {}
  std::string type() const override;
  int64_t iterations() const override;
  void set_iterations(int64_t) override {}  // servers load their own count
  std::vector<std::string> slot_names() const override;
  void read(const std::string& slot, const Variable& v, std::vector<float>& out) override;
  void write(const std::string&, const Variable&, const std::vector<float>&) override {}  // servers load their own

 private:
  ParameterServer& ps_;
};

class ParameterServer final : public Strategy {
 public:
  explicit ParameterServer(const Recipe& recipe)
      : spec_(recipe.strategy),
        optimizer_spec_(recipe.optimizer),
        world_(std::make_unique<MpiCommunicator>()),
        model_state_(*this),
        optimizer_state_(*this) {
    num_ps_ = static_cast<int>(spec_.parameter_server.num_ps);
    DT_USER_CHECK(world_->size() > num_ps_,
                  "{}: parameter_server with num_ps = {} needs more ranks than servers: launch with mpirun -np N, N > {} "
                  "(ranks 0..{} serve, the rest train)",
                  recipe.file, num_ps_, num_ps_, num_ps_ - 1);
    DT_USER_CHECK(spec_.devices.size() == 1, "{}: parameter_server takes one device per worker (strategy.devices), got {}",
                  recipe.file, spec_.devices.size());
    server_ = world_->rank() < num_ps_;
    workers_ = world_->size() - num_ps_;
    group_ = world_->split(server_ ? 0 : 1);
    // Every message and collective is bounded. A worker waits twice as long as a server: a
    // stopped worker holds up the server and, through it, the other workers, and only the
    // server knows which worker it waits for, so its error should come first.
    const double patience = server_ ? spec_.timeout_seconds : 2 * spec_.timeout_seconds;
    world_->set_timeout(patience);
    group_->set_timeout(patience);
    log::set_leader(!server_ && group_->rank() == 0);
    const Device device = server_ ? Device{} : Device::parse(spec_.devices[0], recipe.file + ": strategy.devices");
    replica_ = std::make_unique<Replica>(recipe, backend_for(device));
    group_on_device_ = std::make_unique<StagedCommunicator>(group_, HostStaging(replica_->backend()));
    ledger().add_source(replica_->backend());
    ranges_ = PsRanges{replica_->model().params().values().numel(), num_ps_};
    optimizer_ = make_optimizer(recipe.optimizer);  // a worker's: its slot names and type (the slots are the servers')
    optimizer_->bind(replica_->backend(), 0, {});
  }

  // A worker tells every server it is done; not while an error is on its way to main,
  // which ends the job anyway.
  ~ParameterServer() override {
    if (server_ || std::uncaught_exceptions()) return;
    double none = 0;
    try {
      for (int k = 0; k < num_ps_; ++k) world_->send(host_tensor(&none, 1), k, kDone, "the end of training");
    } catch (const Error& e) {  // the run is over and saved: say why a server may wait, do not throw from here
      log::warn("{}", e.what());
    }
  }

  std::string name() const override { return "parameter_server"; }
  int num_replicas() const override { return workers_; }
  int rank() const override { return group_->rank(); }  // a server's: its index among the servers
  int workers() const override { return workers_; }
  int first_local_replica() const override { return server_ ? 0 : group_->rank(); }
  int local_replicas() const override { return 1; }
  std::string describe() const override {
    return fmt::format("parameter_server: {} server(s), {} worker(s) on {}, {}", num_ps_, workers_, spec_.devices[0],
                       spec_.parameter_server.staleness < 0 ? "asynchronous (no staleness bound)"
                       : spec_.parameter_server.staleness == 0 ? "synchronous (staleness 0)"
                                              : fmt::format("stale-synchronous (staleness {})", spec_.parameter_server.staleness));
  }
  Model& model() override { return replica_->model(); }
  Optimizer& optimizer() override { return *optimizer_; }
  ModelState& model_state() override { return model_state_; }
  OptimizerState& optimizer_state() override { return optimizer_state_; }
  bool serves() const override { return server_; }
  int64_t update_batch(int64_t global_batch) const override {
    return spec_.parameter_server.staleness == 0 ? global_batch : global_batch / workers_;
  }

  void sync_replicas() override {
    Tensor state = model().params().state();
    if (state.numel()) group_on_device_->broadcast(state, 0);
  }

  // Every worker asks at the same step; the servers answer once all have pushed it.
  void prepare_for_read() override {
    read_snapshot();
    Tensor state = model().params().state();
    if (state.numel() == 0) return;
    group_on_device_->all_reduce(state, ReduceOp::sum);
    replica_->backend().scale_shift(state, state, 1.0f / static_cast<float>(workers_), 0.0f);
  }

  LossStats evaluate(const Batch& batch) override { return epoch_total(replica_->evaluate(batch.replicas.at(0))); }

  LossStats epoch_total(const LossStats& local) override { return sum_over_workers(local, *group_); }
  // The trainer asks once per step. Asynchronous workers must not meet every step (it
  // would make them lockstep), so they meet every kStopCheckSteps-th call: the same local
  // step on every worker, since each takes one batch per step. A stop waits that long.
  int max_over_workers(int local) override {
    constexpr int64_t kStopCheckSteps = 16;
    return ++stop_checks_ % kStopCheckSteps == 0 ? max_over(local, *group_) : 0;
  }

  ServeReport serve(const std::string& resume, const std::string& init_from, uint64_t seed) override {
    PsServer server(*world_, ranges_, spec_.parameter_server.staleness, model(), optimizer_spec_);
    server.load(resume, init_from, seed);
    return server.serve();
  }

  const PsRanges& ranges() const { return ranges_; }
  bool is_writer() const { return !server_ && group_->rank() == 0; }

  // Server k's optimizer slot `what` (its index) in the snapshot: its whole range.
  std::vector<float> fetch(int k, double what) {
    world_->send(host_tensor(&what, 1), k, kGet, "a request");
    std::vector<float> out(static_cast<size_t>(ranges_.length(k)));
    world_->recv(host_tensor(out.data(), ranges_.length(k)), k, kGot, fmt::format("server {}'s range", k));
    return out;
  }
  int64_t fetch_iterations() {
    double what = kGetIterations, iterations = 0;
    world_->send(host_tensor(&what, 1), 0, kGet, "a request");
    world_->recv(host_tensor(&iterations, 1), 0, kGot, "server 0's iteration count");
    return static_cast<int64_t>(iterations);
  }

 protected:
  void compute_gradients(const Batch& batch, const StepInfo& info) override {
    pull(clock_);
    lr_ = info.learning_rate;
    model().zero_grads();
    const ReplicaSlice& slice = batch.replicas.at(0);
    // Synchronous: the servers sum the workers' pushes, so each is 1 / global batch.
    // Otherwise each push is applied alone: the mean over this worker's batch.
    const float scale = spec_.parameter_server.staleness == 0 ? 1.0f / static_cast<float>(batch.global_labels())
                                             : 1.0f / static_cast<float>(std::max<size_t>(slice.labels.size(), 1));
    replica_->forward_backward(slice, scale, info.seed ^ static_cast<uint64_t>(group_->rank()),
                               ledger().loss_slot(0, static_cast<int64_t>(slice.labels.size())));
  }

  // Nothing is reduced here: a worker's own gradients are what it pushes (apply_update). A
  // non-finite gradient is not pushed: the trainer then stops the job (a server has no
  // means to refuse a push).
  void reduce_gradients() override { pushed_finite_ = all_finite(replica_->backend(), model().params().grads()); }

  // The servers apply each push (or, synchronous, their sum); clipping scales this worker's
  // gradients first, by their own norm (the recipe refuses clip_norm with staleness 0).
  void apply_update(const StepInfo& info) override {
    std::vector<float> grads(static_cast<size_t>(ranges_.arena));
    replica_->backend().download(model().params().grads(), grads.data());
    if (info.gradient_scale != 1.0f)
      for (float& g : grads) g *= info.gradient_scale;
    for (int k = 0; k < num_ps_; ++k) {
      std::vector<float> msg(static_cast<size_t>(ranges_.length(k)) + 1);
      msg[0] = lr_;
      std::copy(grads.begin() + ranges_.begin(k), grads.begin() + ranges_.begin(k + 1), msg.begin() + 1);
      world_->send(host_tensor(msg.data(), ranges_.length(k) + 1), k, kPush, fmt::format("the gradients of step {}", clock_ + 1));
    }
    ++clock_;
  }
  // The recipe refuses train.on_nonfinite = "skip_step" here: a server applies each push
  // without knowing the other workers' losses.
  void discard_step() override { throw Error("parameter_server: a step cannot be discarded"); }
  // This worker's own gradients, checked before they are pushed (reduce_gradients).
  bool gradients_finite() override { return pushed_finite_; }
  double gradient_sum_of_squares() override { return sum_of_squares(replica_->backend(), model().params().grads()); }

 private:
  friend class PsModelState;
  friend class PsOptimizerState;

  // The current parameters from every server for step `clock`, waiting as the staleness
  // bound says.
  void pull(int64_t clock) {
    parameters_from_servers(kPull, kValues, clock,
                            fmt::format("parameters for step {}{}", clock + 1,
                                        spec_.parameter_server.staleness == 0 ? " (synchronous: it waits for every worker's push)" : ""));
  }

  // The parameters after every worker's first clock_ pushes; the servers keep that state
  // for the slots and iterations a checkpoint reads next (ps_server.hpp).
  void read_snapshot() {
    parameters_from_servers(kSnapshot, kGot, clock_,
                            fmt::format("parameters after step {} (it waits for every worker's push)", clock_));
  }

  void parameters_from_servers(PsTag request, PsTag reply, int64_t clock, const std::string& what) {
    std::vector<float> values(static_cast<size_t>(ranges_.arena));
    for (int k = 0; k < num_ps_; ++k) {
      double c = static_cast<double>(clock);
      world_->send(host_tensor(&c, 1), k, request, "a request for parameters");
      world_->recv(host_tensor(values.data() + ranges_.begin(k), ranges_.length(k)), k, reply,
                   fmt::format("server {}'s {}", k, what));
    }
    replica_->backend().upload(values.data(), model().params().values());
  }

  StrategySpec spec_;
  OptimizerSpec optimizer_spec_;
  std::unique_ptr<MpiCommunicator> world_;
  std::shared_ptr<MpiCommunicator> group_;  // the servers, or the workers
  std::unique_ptr<StagedCommunicator> group_on_device_;  // group_ for the replica's tensors (a GPU's through host memory)
  PsModelState model_state_;
  PsOptimizerState optimizer_state_;
  int num_ps_ = 1, workers_ = 0;
  bool server_ = false;
  std::unique_ptr<Replica> replica_;
  std::unique_ptr<Optimizer> optimizer_;
  PsRanges ranges_;
  int64_t clock_ = 0, stop_checks_ = 0;
  bool pushed_finite_ = true;
  float lr_ = 0;
};

const ParamArena& PsModelState::layout() const { return ps_.model().params(); }

void PsModelState::read(int id, std::vector<float>& out) {
  const Variable& v = layout().variables().at(static_cast<size_t>(id));
  const Tensor t = ps_.model().params().value(id);  // fresh: prepare_for_read() pulled
  out.resize(static_cast<size_t>(v.shape.numel()));
  ps_.replica_->backend().download(t, out.data());
}

void PsModelState::write(int id, const std::vector<float>& in) {
  // Trainable values live on the servers (they load their own); workers keep the state.
  if (!layout().variables().at(static_cast<size_t>(id)).trainable)
    ps_.replica_->backend().upload(in.data(), ps_.model().params().value(id));
}

std::string PsOptimizerState::type() const { return ps_.optimizer_->type(); }

int64_t PsOptimizerState::iterations() const { return ps_.is_writer() ? ps_.fetch_iterations() : 0; }

std::vector<std::string> PsOptimizerState::slot_names() const { return ps_.optimizer_->slot_names(); }

void PsOptimizerState::read(const std::string& slot, const Variable& v, std::vector<float>& out) {
  out.assign(static_cast<size_t>(v.shape.numel()), 0.0f);
  if (!ps_.is_writer()) return;  // only the writer gathers
  const auto names = slot_names();
  const auto index = static_cast<double>(std::find(names.begin(), names.end(), slot) - names.begin());
  const PsRanges& ranges = ps_.ranges();
  for (int k = 0; k < ranges.servers; ++k) {
    const Range part = intersect(range_of(v), ranges.range(k));
    if (part.empty()) continue;
    const std::vector<float> got = ps_.fetch(k, index);  // the server's whole range of this slot
    std::copy(got.begin() + (part.begin - ranges.begin(k)), got.begin() + (part.end - ranges.begin(k)),
              out.begin() + (part.begin - v.offset));
  }
}

class ParameterServerKind final : public StrategyKind {
 public:
  std::string name() const override { return "parameter_server"; }
  Processes processes() const override { return Processes::launched; }
  std::vector<std::string> own_keys() const override { return {"num_ps", "staleness"}; }
  void parse(ConfigTable& c, StrategySpec& s, const std::vector<Device>&) const override {
    ParameterServerSpec& ps = s.parameter_server;
    ps.num_ps = c.get_int("num_ps", 1);
    if (ps.num_ps < 1) c.fail("num_ps", "must be at least 1");
    if (c.has("staleness")) {
      ps.staleness = c.get_int("staleness");
      if (ps.staleness < 0) c.fail("staleness", "must be >= 0 (0: synchronous); leave it out for no bound");
    }
  }
  // The norm is of the gradient one update applies: a synchronous server sums the workers'
  // pushes of its range only.
  void check_optimizer(ConfigTable& c, const OptimizerSpec& o, const StrategySpec& s) const override {
    if (o.clip_norm > 0 && s.parameter_server.staleness == 0)
      c.fail("clip_norm", "needs an asynchronous parameter_server (staleness > 0 or unbounded): each server sums its part of "
                          "the workers' gradients alone, so none knows the global norm");
  }
  void check_train(ConfigTable& c, const TrainSpec& t) const override {
    if (t.validate_every_steps > 0 || t.early_stopping.enabled)
      c.fail(t.early_stopping.enabled ? "early_stopping" : "validate_every_steps",
             "is not available under parameter_server in this version (its workers validate at epoch ends only)");
    if (t.skip_nonfinite_steps)
      c.fail("on_nonfinite", "\"skip_step\" is not available under parameter_server, whose servers apply each push without "
                             "the other workers' losses; use \"stop\"");
  }
  // One replica per worker; servers train none.
  int replicas(const StrategySpec& s, int ranks) const override {
    return ranks - static_cast<int>(s.parameter_server.num_ps);
  }
  std::vector<std::string> launch_lines(const Recipe& recipe) const override;
  // A worker alone, without its servers.
  std::string checked_alone_as() const override { return "one_device"; }
  std::unique_ptr<Strategy> make(const Recipe& recipe) const override { return std::make_unique<ParameterServer>(recipe); }
};

std::vector<std::string> ParameterServerKind::launch_lines(const Recipe& recipe) const {
  const int64_t servers = recipe.strategy.parameter_server.num_ps;
  std::vector<std::string> lines{fmt::format(
      "launch      mpirun -np N distrain train {} with N > num_ps = {}: ranks 0..{} serve, the other N - {} train; the "
      "figures below are one worker's",
      recipe.file, servers, servers - 1, servers)};
  const Model layout(recipe.model(), backend_for(Device{}), storage_free_seams());
  const PsRanges ranges{layout.params().trainable_arena_size(), static_cast<int>(servers)};
  const int64_t slots = static_cast<int64_t>(make_optimizer(recipe.optimizer)->slots().size());
  const auto element = static_cast<int64_t>(dtype_size(ParamArena::kDType));
  for (int k = 0; k < ranges.servers; ++k)
    lines.push_back(fmt::format("server {:<4}rank {}: values [{}, {}) of the trainable arena, {} with its optimizer's {} "
                                "slot(s)", k, k, ranges.begin(k), ranges.begin(k + 1),
                                format_mib(ranges.length(k) * element * (1 + slots)), slots));
  return lines;
}
DT_REGISTER_STRATEGY(ParameterServerKind, 5);

}  // namespace

}  // namespace distrain
