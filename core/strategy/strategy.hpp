// Strategy: how replicas share a training step (tf.distribute's idea, chosen at run time
// by [strategy] name). A step is always: every replica computes gradients on its slice of
// the global batch (loss divided by the GLOBAL batch), the strategy reduces them (one
// fused collective over the gradient arena, or a sum onto the host), the optimizer
// updates. Metrics come back as sums and counts over all replicas of all workers, read
// after the step (StepLedger).
#pragma once
#include <memory>
#include <string>

#include "core/comm/communicator.hpp"
#include "core/io/recipe.hpp"
#include "core/model/memory_use.hpp"
#include "core/model/model.hpp"
#include "core/model/model_state.hpp"
#include "core/optim/optimizer_state.hpp"
#include "core/strategy/step_ledger.hpp"
#include "datasets/device_data.hpp"
#include "datasets/loader.hpp"

namespace distrain {

struct StepInfo {
  int64_t step = 0;            // optimizer steps done before this one
  float learning_rate = 0.0f;  // from the schedule, for the global batch
  uint64_t seed = 0;           // this step's seed (dropout masks)
  bool skip_nonfinite = false; // a non-finite loss discards the step instead of applying it
  float clip_norm = 0.0f;      // > 0: the reduced gradients are scaled to at most this global norm
  float gradient_scale = 1.0f; // set by the step itself: what clipping multiplies the gradients by
};

// Where the last step's time went, for `distrain bench`.
struct StepTimes {
  double compute = 0, reduce = 0, update = 0;  // seconds
};

// What theory says a step sends per rank over the data axis, for `distrain bench`: the
// collectives in `formula` ("all_reduce: 2(N-1)/N x G", G the gradient bytes one replica
// reduces). An empty formula: the strategy exchanges no gradients by collectives.
struct TrafficTheory {
  std::string formula;
  double bytes = 0;
};
// `passes` (N-1)/N of the gradient bytes of `model`, as `ops` do over n replicas (a pass in
// bf16 counts 0.5).
TrafficTheory gradient_traffic(const std::string& ops, double passes, int n, const Model& model);

// One pipeline stage in the last step: the share of its time spent waiting for its
// neighbours, and the activations it holds at once (for `distrain bench`).
struct StageFigures {
  double idle = 0;
  int64_t activation_bytes = 0;
};

// What a parameter server's server did, for its line of output.
struct ServeReport {
  int server = 0;
  int64_t updates = 0, parameters = 0;
  int64_t max_lead = 0;  // the most steps the fastest worker was ahead of the slowest
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual int num_replicas() const = 0;  // in the whole job
  // This process's rank among the workers that train (0 in one process); on a parameter
  // server's server (serves()), its index among the servers.
  virtual int rank() const { return 0; }
  virtual int workers() const { return 1; }
  // The replicas of the job this process runs: [first_local_replica(), + local_replicas()).
  virtual int first_local_replica() const { return 0; }
  // How evaluation splits a batch: into eval_shares() parts, this process evaluating part
  // eval_share(). Every worker its own by default; ranks that must see the same examples
  // (a mesh's tensor group and pipeline stages) share one.
  virtual int eval_shares() const { return workers(); }
  virtual int eval_share() const { return rank(); }
  virtual int local_replicas() const { return num_replicas(); }
  // The backend of this process's local replica r (its device memory, for bench).
  virtual Backend& replica_backend(int) { return model().params().backend(); }
  // One line: devices, replicas, how gradients travel.
  virtual std::string describe() const = 0;

  // The model of this process's first replica (its layout; its values unless sharded).
  virtual Model& model() = 0;
  // The variables as checkpoints and initialisation see them (gathered when sharded).
  virtual ModelState& model_state() {
    if (!arena_state_) arena_state_ = std::make_unique<ArenaModelState>(model().params());
    return *arena_state_;
  }
  // The optimizer of model() (for its description), and its state as checkpoints see it.
  virtual Optimizer& optimizer() = 0;
  virtual OptimizerState& optimizer_state() = 0;
  // What a replica holds: what its model's gatherer and reducer keep (everything when
  // replicated, a shard and a bucket when sharded; under bf16 the model's rounded copy of
  // a layer's parameters too) and its optimizer's slots; what of it is in host memory.
  virtual MemoryUse memory_per_replica(int64_t per_replica_batch) {
    int64_t slots = 0, offloaded = model().gatherer().host_bytes();
    for (const auto& [name, t] : optimizer().slots()) (t.device == Device::host() ? offloaded : slots) += static_cast<int64_t>(t.bytes());
    const int64_t values = model().gatherer().bytes() + model().parameter_copy_bytes();
    return MemoryUse{values + static_cast<int64_t>(model().params().state().bytes()),
                     model().reducer().bytes() + model().tied_gradient_bytes(), slots, model().activation_bytes(per_replica_batch),
                     offloaded};
  }
  // What the collectives of this process's first replica have sent so far (CommTraffic),
  // among the data-parallel replicas and along a mesh's tensor axis; and what a step
  // should send among the replicas by theory.
  virtual CommTraffic data_traffic() const { return {}; }
  virtual CommTraffic tensor_traffic() const { return {}; }
  virtual TrafficTheory traffic_theory() { return {}; }
  // Per pipeline stage, the last step's figures (collective over the job: every rank calls
  // it); empty without pipeline stages. The theory's idle share with M micro-batches.
  virtual std::vector<StageFigures> stage_figures(int64_t) { return {}; }
  virtual double stage_idle_theory() const { return 0; }
  // After model() or optimizer() were set (initialised, loaded): copies them to every
  // replica and worker so all start identical.
  virtual void sync_replicas() {}
  // Keeps a split on the devices of this process's replicas (one copy per device;
  // DeviceData), so that batches whose slices carry indices (LoaderSpec::indices_only) are
  // gathered there: the training steps' with DataUse::training, evaluate()'s with
  // DataUse::evaluation. False where the strategy's replicas take images only (the loader
  // then builds them).
  virtual bool keep_data_on_devices(const Dataset& data, DataUse use) {
    (void)data, (void)use;
    return false;
  }
  // Before evaluating or saving: non-trainable state (batch-norm moving statistics, which
  // each replica updates from its own batches) becomes the mean over replicas in model().
  virtual void prepare_for_read() {}

  // The whole step, queued: gradients, reduction, update. Its loss sums and finiteness
  // are read later (read_steps), so a GPU need not wait for the host. A step whose loss
  // or reduced gradients are not finite is wrong. With info.skip_nonfinite, on the CPU, or
  // where the gradients can only be checked on the host (reduced_gradients() empty), the
  // strategy decides before the update and does not apply it (every replica and worker
  // agrees, as the verdict comes from the losses of all and the reduced gradients, the
  // same everywhere; unread_failure() says so at once), and with info.skip_nonfinite undoes
  // its effect on non-trainable state too, so that training can go on as if it never ran.
  // On a GPU otherwise, the update is applied and the step's read says it was not finite:
  // the run must stop there, before anything saves the variables (StepLoop does).
  void train_step(const Batch& batch, const StepInfo& info);
  // The steps queued since the last read, in order, with their figures over every replica
  // of every worker: waits for the devices. Collective where workers are: every worker
  // reads after the same steps.
  std::vector<StepResult> read_steps();
  int64_t unread_steps() const { return ledger_.unread(); }
  // Whether an unread step was already found non-finite as it ran (decided on the host).
  bool unread_failure() const { return ledger_.holds_known_failure(); }
  // Loss and accuracy of model() on this process's share of a batch, summed over workers.
  virtual LossStats evaluate(const Batch& batch) = 0;
  // An epoch's training metrics over all workers, from this process's (strategies whose
  // read_steps sums over workers return them unchanged).
  virtual LossStats epoch_total(const LossStats& local) { return local; }
  // The largest `local` over the workers that train (one tiny all-reduce): lets every worker
  // act on what only some see, such as a stop signal sent to one rank, after the same step.
  virtual int max_over_workers(int local) { return local; }
  // Each worker's values summed element by element over the workers (one all-reduce).
  virtual void sum_figures_over_workers(std::vector<double>&) {}
  // Per replica of the job (workers x local replicas, in rank order): its device's measured
  // high-water mark and memory_per_replica's total. Collective over the workers.
  std::vector<std::pair<int64_t, int64_t>> device_memory_over_job(int64_t per_replica_batch);

  // The batch one optimizer update sees, for the learning-rate schedule: the global batch,
  // except for an asynchronous parameter server, which applies each worker's push alone.
  virtual int64_t update_batch(int64_t global_batch) const { return global_batch; }

  // A parameter server's server ranks train nothing: they serve() until every worker is
  // done. resume: the checkpoint to continue from (""), else init_from (""), else the seed.
  virtual bool serves() const { return false; }
  virtual ServeReport serve(const std::string& resume, const std::string& init_from, uint64_t seed) {
    (void)resume, (void)init_from, (void)seed;
    return {};
  }
  const StepTimes& last_step_times() const { return times_; }

 protected:
  // Every replica's forward and backward pass, their losses into ledger() (loss_slot, or
  // record_losses where the host has them).
  virtual void compute_gradients(const Batch& batch, const StepInfo& info) = 0;
  virtual void reduce_gradients() = 0;
  virtual void apply_update(const StepInfo& info) = 0;
  // The reduced gradients, the same on every replica and worker (one arena on one
  // device), where they can be checked without waiting; empty (no backend) where only
  // gradients_finite() can tell (sharded, or pushed to servers).
  struct ReducedGradients {
    Backend* backend = nullptr;
    Tensor grads;
  };
  virtual ReducedGradients reduced_gradients() { return {}; }
  // Whether the reduced gradients are all finite, decided now on the host: the same answer
  // on every replica and worker. By default a scan of reduced_gradients().
  virtual bool gradients_finite();
  // The sum of squares of the gradients an update applies, over every shard (collective
  // where sharded): the same on every replica and worker. By default reduced_gradients()'.
  virtual double gradient_sum_of_squares();
  // Whether a step's losses are finite on every worker, from this process's verdict.
  virtual bool finite_on_every_worker(bool local) { return local; }
  // Turns this process's figures of `steps` (read from the ledger) into sums over every
  // worker, in one exchange; none by default (one process, or figures recorded whole).
  virtual void sum_steps_over_workers(std::vector<StepResult>& steps) { (void)steps; }
  // After compute_gradients with info.skip_nonfinite (which then keeps a copy): puts back
  // the non-trainable state (batch-norm moving statistics) as it was before the step.
  virtual void discard_step() = 0;
  StepLedger& ledger() { return ledger_; }

 private:
  std::unique_ptr<ArenaModelState> arena_state_;
  void reduce_check_update(const StepInfo& info);
  // info with gradient_scale set from the global norm, which the ledger records.
  StepInfo clipped(const StepInfo& info);
  StepTimes times_;
  StepLedger ledger_;
};

class Communicator;
class Mesh;
// Metrics summed over the ranks of `world` (sums and counts, never means): one step's, or
// each of several steps' in one exchange.
LossStats sum_over_workers(const LossStats& local, Communicator& world);
void sum_over_workers(std::vector<StepResult>& steps, Communicator& world);
// The largest `local` over the workers of `world`.
int max_over(int local, Communicator& world);
// Where a replica's optimizer keeps its state and runs its update: on the replica's device,
// or with strategy.offload_optimizer in host memory (host_backend()), where the host's
// cores update the device's parameters from its gradients. On CPU devices both are this
// process's memory, so nothing is copied; the device's budget no longer holds the state.
Backend& optimizer_place(const StrategySpec& spec, Backend& device);

// Builds the strategy a recipe names; its variables are allocated, not yet initialised.
// `alone_in_job`: this process runs a one-process strategy by itself although a launcher
// started others (`distrain plan --measure` profiles on rank 0 while the others wait).
// `mesh`: the mesh strategy's ranks (a thread mesh, in tests); null: this job's MPI processes.
std::unique_ptr<Strategy> make_strategy(const Recipe& recipe, bool alone_in_job = false, const Mesh* mesh = nullptr);
// The num_replicas() of make_strategy(recipe), from the recipe and the launcher's process
// count alone: for the checks made before anything is built.
int planned_replicas(const Recipe& recipe);

}  // namespace distrain
