#include "core/strategy/parameter_server.hpp"

#include <mpi.h>

#include <algorithm>
#include <deque>

#include "core/backend/backend.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/io/checkpoint.hpp"
#include "core/strategy/replica.hpp"

namespace distrain {

namespace {

// Messages between workers and servers (MPI_COMM_WORLD).
enum Tag : int { kPull = 101, kValues, kPush, kDone, kGet, kGot };
constexpr int64_t kGetValues = -1, kGetIterations = -2;  // kGet payloads besides a slot index

void mpi_check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw Error(fmt::format("parameter_server: {} failed (MPI error {})", what, code));
}

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
    num_ps_ = static_cast<int>(spec_.num_ps);
    world_->set_timeout(spec_.timeout_seconds);  // the collectives; the point-to-point messages below wait unbounded
    DT_USER_CHECK(world_->size() > num_ps_,
                  "{}: parameter_server with num_ps = {} needs more ranks than servers: launch with mpirun -np N, N > {} "
                  "(ranks 0..{} serve, the rest train)",
                  recipe.file, num_ps_, num_ps_, num_ps_ - 1);
    DT_USER_CHECK(spec_.devices.size() == 1, "{}: parameter_server takes one device per worker (strategy.devices), got {}",
                  recipe.file, spec_.devices.size());
    server_ = world_->rank() < num_ps_;
    workers_ = world_->size() - num_ps_;
    group_ = world_->split(server_ ? 0 : 1);
    log::set_leader(!server_ && group_->rank() == 0);
    const Device device = server_ ? Device{} : Device::parse(spec_.devices[0], recipe.file + ": strategy.devices");
    replica_ = std::make_unique<Replica>(recipe, backend_for(device));
    arena_ = replica_->model().params().values().numel();
    optimizer_ = make_optimizer(recipe.optimizer);
    optimizer_->bind(replica_->backend(), server_ ? length(world_->rank()) : 0);
    if (server_) values_.assign(static_cast<size_t>(length(world_->rank())), 0.0f);
  }

  ~ParameterServer() override {
    if (server_ || std::uncaught_exceptions()) return;
    int64_t none = 0;
    for (int k = 0; k < num_ps_; ++k) MPI_Send(&none, 1, MPI_INT64_T, k, kDone, MPI_COMM_WORLD);
  }

  std::string name() const override { return "parameter_server"; }
  int num_replicas() const override { return workers_; }
  int rank() const override { return server_ ? -1 : group_->rank(); }
  int workers() const override { return workers_; }
  int first_local_replica() const override { return server_ ? 0 : group_->rank(); }
  int local_replicas() const override { return 1; }
  std::string describe() const override {
    return fmt::format("parameter_server: {} server(s), {} worker(s) on {}, {}", num_ps_, workers_, spec_.devices[0],
                       spec_.staleness < 0 ? "asynchronous (no staleness bound)"
                       : spec_.staleness == 0 ? "synchronous (staleness 0)"
                                              : fmt::format("stale-synchronous (staleness {})", spec_.staleness));
  }
  Model& model() override { return replica_->model(); }
  Optimizer& optimizer() override { return *optimizer_; }
  ModelState& model_state() override { return model_state_; }
  OptimizerState& optimizer_state() override { return optimizer_state_; }
  bool serves() const override { return server_; }
  int64_t update_batch(int64_t global_batch) const override {
    return spec_.staleness == 0 ? global_batch : global_batch / workers_;
  }

  void sync_replicas() override {
    Tensor state = model().params().state();
    if (state.numel()) group_->broadcast(state, 0);
  }

  void prepare_for_read() override {
    pull(-1);
    Tensor state = model().params().state();
    if (state.numel() == 0) return;
    group_->all_reduce(state, ReduceOp::sum);
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

  void serve(const std::string& resume, const std::string& init_from, uint64_t seed) override;

  // Server k's range of the arena: [begin(k), begin(k + 1)), 16-float aligned.
  int64_t begin(int k) const {
    return k >= num_ps_ ? arena_ : arena_ * k / num_ps_ / ParamArena::kAlign * ParamArena::kAlign;
  }
  int64_t length(int k) const { return begin(k + 1) - begin(k); }
  int num_ps() const { return num_ps_; }
  bool is_writer() const { return !server_ && group_->rank() == 0; }

  // Asks server k for its values (kGetValues), its iteration count or slot `what`.
  std::vector<float> fetch(int k, int64_t what) {
    mpi_check(MPI_Send(&what, 1, MPI_INT64_T, k, kGet, MPI_COMM_WORLD), "MPI_Send");
    std::vector<float> out(what == kGetIterations ? 2 : static_cast<size_t>(length(k)));
    mpi_check(MPI_Recv(out.data(), static_cast<int>(out.size()), MPI_FLOAT, k, kGot, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
    return out;
  }

 protected:
  LossStats compute_gradients(const Batch& batch, const StepInfo& info) override {
    pull(clock_);
    lr_ = info.learning_rate;
    model().zero_grads();
    const ReplicaSlice& slice = batch.replicas.at(0);
    // Synchronous: the servers sum the workers' pushes, so each is 1 / global batch.
    // Otherwise each push is applied alone: the mean over this worker's batch.
    const float scale = spec_.staleness == 0 ? 1.0f / static_cast<float>(batch.global_count)
                                             : 1.0f / static_cast<float>(std::max<int64_t>(slice.count, 1));
    return replica_->forward_backward(slice, scale, info.seed ^ static_cast<uint64_t>(group_->rank()));
  }

  void reduce_gradients() override {
    std::vector<float> grads(static_cast<size_t>(arena_));
    replica_->backend().download(model().params().grads(), grads.data());
    for (int k = 0; k < num_ps_; ++k) {
      std::vector<float> msg(static_cast<size_t>(length(k)) + 1);
      msg[0] = lr_;
      std::copy(grads.begin() + begin(k), grads.begin() + begin(k) + length(k), msg.begin() + 1);
      mpi_check(MPI_Send(msg.data(), static_cast<int>(msg.size()), MPI_FLOAT, k, kPush, MPI_COMM_WORLD), "MPI_Send");
    }
    ++clock_;
  }

  void apply_update(const StepInfo&) override {}  // the servers apply

 private:
  friend class PsModelState;
  friend class PsOptimizerState;

  // The current parameters from every server: for step `clock` (waiting as the staleness
  // bound says), or the latest (clock < 0).
  void pull(int64_t clock) {
    std::vector<float> values(static_cast<size_t>(arena_));
    for (int k = 0; k < num_ps_; ++k) {
      if (clock < 0) {
        const std::vector<float> got = fetch(k, kGetValues);
        std::copy(got.begin(), got.end(), values.begin() + begin(k));
        continue;
      }
      mpi_check(MPI_Send(&clock, 1, MPI_INT64_T, k, kPull, MPI_COMM_WORLD), "MPI_Send");
      mpi_check(MPI_Recv(values.data() + begin(k), static_cast<int>(length(k)), MPI_FLOAT, k, kValues, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE),
                "MPI_Recv");
    }
    replica_->backend().upload(values.data(), model().params().values());
  }

  StrategySpec spec_;
  OptimizerSpec optimizer_spec_;
  std::unique_ptr<MpiCommunicator> world_, group_;  // group_: the servers, or the workers
  PsModelState model_state_;
  PsOptimizerState optimizer_state_;
  int num_ps_ = 1, workers_ = 0;
  bool server_ = false;
  std::unique_ptr<Replica> replica_;
  std::unique_ptr<Optimizer> optimizer_;  // on a server: slots for its range
  std::vector<float> values_;             // on a server: its range of the parameters
  int64_t arena_ = 0, clock_ = 0, stop_checks_ = 0;
  float lr_ = 0;
};

void ParameterServer::serve(const std::string& resume, const std::string& init_from, uint64_t seed) {
  const int k = world_->rank();
  const int64_t lo = begin(k), n = length(k);
  const ParamArena& layout = model().params();
  // Initial values: the checkpoint's, else the seed's; each variable's part in our range.
  std::vector<float> host;
  const std::string source = resume.empty() ? init_from : resume;
  for (size_t i = 0; i < layout.variables().size(); ++i) {
    const Variable& v = layout.variables()[i];
    if (!v.trainable) continue;
    const int64_t a = std::max(lo, v.offset), b = std::min(lo + n, v.offset + v.shape.numel());
    if (a >= b) continue;
    host = layout.initial_value(static_cast<int>(i), seed);
    std::copy(host.begin() + (a - v.offset), host.begin() + (b - v.offset), values_.begin() + (a - lo));
  }
  if (!source.empty()) {
    ArenaModelState full(model().params());
    load_weights(source, full);  // the whole model on this server's host copy, then its range
    std::vector<float> all(static_cast<size_t>(arena_));
    replica_->backend().download(model().params().values(), all.data());
    std::copy(all.begin() + lo, all.begin() + lo + n, values_.begin());
  }
  if (!resume.empty()) {
    // Slots: the checkpoint stores them whole; keep our range.
    Optimizer& opt = *optimizer_;
    auto whole = make_optimizer(optimizer_spec_);
    whole->bind(replica_->backend(), arena_);
    ArenaOptimizerState whole_state(*whole, replica_->backend());
    load_optimizer(resume, layout, whole_state);
    const auto from = whole->slots();
    const auto to = opt.slots();
    for (size_t s = 0; s < to.size(); ++s) replica_->backend().copy(from[s].second.range(lo, n), to[s].second);
    opt.set_iterations(whole->iterations());
  }

  Tensor params{values_.data(), Shape{n}, DType::f32, Device{}};
  std::vector<int64_t> clocks(static_cast<size_t>(workers_), 0);
  std::vector<std::vector<float>> pushed(static_cast<size_t>(workers_));  // synchronous: this step's pushes
  std::vector<float> msg(static_cast<size_t>(n) + 1), sum(static_cast<size_t>(n));
  std::deque<std::pair<int, int64_t>> waiting;  // pulls not yet allowed: (rank, clock)
  int done = 0, pushes_this_step = 0;
  int64_t max_lead = 0, updates = 0;
  const bool sync = spec_.staleness == 0;
  while (done < workers_ || !waiting.empty()) {
    MPI_Status st;
    mpi_check(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st), "MPI_Probe");
    const int from = st.MPI_SOURCE, w = from - num_ps_;
    if (st.MPI_TAG == kPull) {
      int64_t clock = 0;
      MPI_Recv(&clock, 1, MPI_INT64_T, from, kPull, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      waiting.emplace_back(from, clock);
    } else if (st.MPI_TAG == kPush) {
      MPI_Recv(msg.data(), static_cast<int>(msg.size()), MPI_FLOAT, from, kPush, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const float lr = msg[0];
      if (sync) {
        pushed[static_cast<size_t>(w)].assign(msg.begin() + 1, msg.end());
        if (++pushes_this_step == workers_) {  // sum in worker order: the result does not depend on timing
          std::fill(sum.begin(), sum.end(), 0.0f);
          for (const auto& g : pushed)
            for (size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
          optimizer_->update(params, Tensor{sum.data(), Shape{n}, DType::f32, Device{}}, lr);
          ++updates;
          pushes_this_step = 0;
        }
      } else {
        optimizer_->update(params, Tensor{msg.data() + 1, Shape{n}, DType::f32, Device{}}, lr);
        ++updates;
      }
      ++clocks[static_cast<size_t>(w)];
      const auto [mn, mx] = std::minmax_element(clocks.begin(), clocks.end());
      max_lead = std::max(max_lead, *mx - *mn);
    } else if (st.MPI_TAG == kDone) {
      int64_t none = 0;
      MPI_Recv(&none, 1, MPI_INT64_T, from, kDone, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      ++done;
      clocks[static_cast<size_t>(w)] = INT64_MAX / 2;  // a finished worker holds nobody back
    } else if (st.MPI_TAG == kGet) {
      int64_t what = 0;
      MPI_Recv(&what, 1, MPI_INT64_T, from, kGet, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      std::vector<float> reply;
      if (what == kGetValues) {
        reply = values_;
      } else if (what == kGetIterations) {
        const auto it = static_cast<uint64_t>(optimizer_->iterations());  // as two 24-bit halves: exact in float
        reply = {static_cast<float>(it >> 24), static_cast<float>(it & 0xffffff)};
      } else {
        const Tensor slot = optimizer_->slots().at(static_cast<size_t>(what)).second;
        reply.resize(static_cast<size_t>(n));
        replica_->backend().download(slot, reply.data());
      }
      MPI_Send(reply.data(), static_cast<int>(reply.size()), MPI_FLOAT, from, kGot, MPI_COMM_WORLD);
    } else {
      throw Error(fmt::format("parameter_server: unexpected message tag {} from rank {}", st.MPI_TAG, from));
    }
    // Serve the pulls the staleness bound now allows (synchronous: the step's update is in).
    const int64_t slowest = *std::min_element(clocks.begin(), clocks.end());
    for (auto it = waiting.begin(); it != waiting.end();) {
      const bool allowed = spec_.staleness < 0 || it->second - slowest <= spec_.staleness;
      if (!allowed) {
        ++it;
        continue;
      }
      MPI_Send(values_.data(), static_cast<int>(n), MPI_FLOAT, it->first, kValues, MPI_COMM_WORLD);
      it = waiting.erase(it);
    }
  }
  fmt::print("[server {}] {} updates of {} parameters; workers were at most {} step(s) apart\n", k, updates, n, max_lead);
  std::fflush(stdout);
}

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

int64_t PsOptimizerState::iterations() const {
  if (!ps_.is_writer()) return 0;
  const std::vector<float> got = ps_.fetch(0, kGetIterations);
  return (static_cast<int64_t>(got[0]) << 24) | static_cast<int64_t>(got[1]);
}

std::vector<std::string> PsOptimizerState::slot_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : ps_.optimizer_->slots()) names.push_back(name);
  return names;
}

void PsOptimizerState::read(const std::string& slot, const Variable& v, std::vector<float>& out) {
  out.assign(static_cast<size_t>(v.shape.numel()), 0.0f);
  if (!ps_.is_writer()) return;  // only the writer gathers
  const auto names = slot_names();
  const auto index = static_cast<int64_t>(std::find(names.begin(), names.end(), slot) - names.begin());
  for (int k = 0; k < ps_.num_ps(); ++k) {
    const int64_t a = std::max(ps_.begin(k), v.offset), b = std::min(ps_.begin(k) + ps_.length(k), v.offset + v.shape.numel());
    if (a >= b) continue;
    const std::vector<float> got = ps_.fetch(k, index);  // the server's whole range of this slot
    std::copy(got.begin() + (a - ps_.begin(k)), got.begin() + (b - ps_.begin(k)), out.begin() + (a - v.offset));
  }
}

}  // namespace

std::unique_ptr<Strategy> make_parameter_server(const Recipe& recipe) { return std::make_unique<ParameterServer>(recipe); }

}  // namespace distrain
