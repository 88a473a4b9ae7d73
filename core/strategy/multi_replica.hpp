// MultiReplicaStrategy: what mirrored, multi_worker_mirrored, central_storage and zero
// share. They are given a ReplicaMesh (one replica per listed device, each on its own
// thread, on the data axis with every replica of the job). It owns the replicas'
// forward/backward pass, evaluation, the averaging of batch-norm state, the cross-replica
// sums (sync_batch_norm) and the consistency check; subclasses decide how gradients are
// reduced and who updates what.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/strategy/replica.hpp"
#include "core/strategy/replica_mesh.hpp"
#include "core/strategy/replica_threads.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

class MultiReplicaStrategy : public Strategy {
 public:
  // What replica r's model is given (ZeRO's gatherer and reducer), from the data axis as
  // replica r sees it; empty: the defaults.
  using SeamFactory = std::function<ModelSeams(Communicator& data_axis)>;

  int num_replicas() const override { return local_replicas() * workers_; }
  int rank() const override { return rank_; }
  int workers() const override { return workers_; }
  int first_local_replica() const override { return rank_ * local_replicas(); }
  int local_replicas() const override { return static_cast<int>(replicas_.size()); }
  Model& model() override { return replicas_[0]->model(); }
  // Batch-norm moving statistics become their mean over all replicas.
  void prepare_for_read() override;
  // Replica 0 of each worker evaluates its share (the others take part when the model's
  // gatherer communicates in forward); sums over workers.
  LossStats evaluate(const Batch& batch) override;
  bool keep_data_on_devices(const Dataset& data, DataUse use) override;
  int max_over_workers(int local) override { return world() ? max_over(local, *world()) : local; }
  void sum_figures_over_workers(std::vector<double>& v) override {
    if (world()) world()->all_reduce(host_tensor(v.data(), static_cast<int64_t>(v.size())), ReduceOp::sum);
  }
  Backend& replica_backend(int r) override { return replica(r).backend(); }
  CommTraffic data_traffic() const override { return mesh_.replica(0).axis(Axis::data).traffic(); }

 protected:
  MultiReplicaStrategy(const Recipe& recipe, ReplicaMesh mesh, const SeamFactory& seams = {});

  // Every replica zeroes its gradients and runs forward and backward on its slice.
  void compute_gradients(const Batch& batch, const StepInfo& info) override;
  void discard_step() override;
  // Replica 0's gradient arena, which the reduction made every replica's (strategies that
  // reduce elsewhere say where).
  ReducedGradients reduced_gradients() override;
  bool finite_on_every_worker(bool local) override { return !max_over_workers(local ? 0 : 1); }
  void sum_steps_over_workers(std::vector<StepResult>& steps) override {
    if (world()) sum_over_workers(steps, *world());
  }
  // Every replica of the job, as replica r sees them (rank: its index in the job); call it
  // on replica r's thread.
  Communicator& all_replicas(int r) { return mesh_.replica(r).axis(Axis::data); }
  // Called on replica r's thread for its own tensor t: t becomes the sum over every replica.
  void sum_over_replicas(int r, Tensor t) { all_replicas(r).all_reduce(t, ReduceOp::sum); }
  // Every check_every steps: replicas' parameters must be bitwise equal; throws naming the
  // first that differs.
  void maybe_check_consistency();
  // Replica 0's variables (and, with a replicated update per replica, its optimizer's slots
  // and iteration count) to every replica of every worker.
  void copy_from_first(const std::vector<Optimizer*>& optimizers);

  Replica& replica(int r) { return *replicas_[static_cast<size_t>(r)]; }
  // One rank per process (the main thread's), or null.
  MpiCommunicator* world() const { return mesh_.workers(); }
  ReplicaThreads& threads() { return *threads_; }
  const StrategySpec& spec() const { return spec_; }

 private:
  StrategySpec spec_;
  ReplicaMesh mesh_;  // before the replicas: their models' seams use its communicators
  int rank_ = 0, workers_ = 1;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::unique_ptr<ReplicaThreads> threads_;
  int64_t steps_ = 0;
};

}  // namespace distrain
