#include "core/strategy/multi_replica.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/backend/backend.hpp"
#include "core/base/rng.hpp"

namespace distrain {

namespace {

// Through the host, so replicas on different devices work alike.
void copy_tensor(Backend& from_be, const Tensor& from, Backend& to_be, Tensor to) {
  std::vector<float> host(static_cast<size_t>(from.numel()));
  from_be.download(from, host.data());
  to_be.upload(host.data(), to);
}

void broadcast_tensor(Backend& be, Tensor t, MpiCommunicator& world) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  be.download(t, host.data());
  world.broadcast(Tensor{host.data(), t.shape, DType::f32, Device{}}, 0);
  be.upload(host.data(), t);
}

// Sum of all trainable values, in arena order (bitwise equal for bitwise equal models).
double checksum(Model& model) {
  const Tensor v = model.params().values();
  std::vector<float> host(static_cast<size_t>(v.numel()));
  model.backend().download(v, host.data());
  double s = 0.0;
  for (float x : host) s += x;
  return s;
}

}  // namespace

MultiReplicaStrategy::MultiReplicaStrategy(const Recipe& recipe, ReplicaMesh mesh, const SeamFactory& seams)
    : spec_(recipe.strategy), mesh_(std::move(mesh)) {
  if (world()) {
    rank_ = world()->rank();
    workers_ = world()->size();
  }
  const int n = mesh_.local_replicas();
  for (int r = 0; r < n; ++r) {
    Backend& be = mesh_.backend(r);
    replicas_.push_back(std::make_unique<Replica>(recipe, be, seams ? seams(all_replicas(r)) : ModelSeams{}));
    ledger().add_source(be);
    if (spec_.sync_batch_norm) replicas_.back()->set_cross_replica_sum([this, r](Tensor values) { sum_over_replicas(r, values); });
  }
  threads_ = std::make_unique<ReplicaThreads>(n, std::max(1, cpu_threads() / n),
                                              [this](const std::string& why) { mesh_.abort(why); });
}

void MultiReplicaStrategy::compute_gradients(const Batch& batch, const StepInfo& info) {
  const float grad_scale = 1.0f / static_cast<float>(batch.global_labels());
  threads_->run([&](int r) {
    Replica& rep = replica(r);
    rep.model().zero_grads();
    if (info.skip_nonfinite) rep.keep_state();
    const ReplicaSlice& slice = batch.replicas.at(static_cast<size_t>(r));
    rep.forward_backward(slice, grad_scale, derive_seed(info.seed, static_cast<uint64_t>(first_local_replica() + r)),
                         ledger().loss_slot(r, static_cast<int64_t>(slice.labels.size())));
  });
}

MultiReplicaStrategy::ReducedGradients MultiReplicaStrategy::reduced_gradients() {
  return {&replica(0).backend(), replica(0).model().params().grads()};
}

void MultiReplicaStrategy::discard_step() {
  threads_->run([&](int r) { replica(r).restore_state(); });
}

bool MultiReplicaStrategy::keep_data_on_devices(const Dataset& data, DataUse use) {
  if (use == DataUse::evaluation) {  // evaluate() runs on replica 0 alone
    replica(0).use_device_data(use, std::make_shared<DeviceData>(replica(0).backend(), data));
    return true;
  }
  std::map<Backend*, std::shared_ptr<const DeviceData>> on;  // logical devices share their device's copy
  for (auto& rep : replicas_) {
    auto& copy = on[&rep->backend()];
    if (!copy) copy = std::make_shared<DeviceData>(rep->backend(), data);
    rep->use_device_data(use, copy);
  }
  return true;
}

LossStats MultiReplicaStrategy::evaluate(const Batch& batch) {
  LossStats local;
  if (local_replicas() > 1 && replica(0).model().gatherer().collective()) {
    threads_->run([&](int r) {  // replica 0 has the data; the others join the gatherer's collectives
      if (r == 0) local = replica(0).evaluate(batch.replicas.at(0));
      else replica(r).evaluate(ReplicaSlice{});
    });
  } else {
    local = replicas_[0]->evaluate(batch.replicas.at(0));
  }
  return world() ? sum_over_workers(local, *world()) : local;
}

void MultiReplicaStrategy::prepare_for_read() {
  threads_->run([&](int r) {
    Tensor state = replica(r).model().params().state();
    if (state.numel() == 0) return;
    sum_over_replicas(r, state);
    replica(r).backend().scale_shift(state, state, 1.0f / static_cast<float>(num_replicas()), 0.0f);
  });
}

void MultiReplicaStrategy::maybe_check_consistency() {
  ++steps_;
  if (spec_.check_every <= 0 || steps_ % spec_.check_every != 0) return;
  std::vector<double> sums(static_cast<size_t>(num_replicas()), 0.0);
  threads_->run([&](int r) { sums[static_cast<size_t>(first_local_replica() + r)] = checksum(replica(r).model()); });
  if (world()) world()->all_reduce_f64(sums.data(), static_cast<int>(sums.size()));  // each slot has one writer
  // A non-finite step's update (applied on a GPU until its figures are read) leaves NaN
  // everywhere: that read reports it, naming the step.
  if (!std::all_of(sums.begin(), sums.end(), [](double s) { return std::isfinite(s); })) return;
  for (size_t r = 1; r < sums.size(); ++r)
    if (sums[r] != sums[0])
      throw Error(fmt::format("replica {} (worker {}) diverged from replica 0 at step {}: parameter checksum {:.17g} vs {:.17g}",
                              r, static_cast<int>(r) / local_replicas(), steps_, sums[r], sums[0]));
}

void MultiReplicaStrategy::copy_from_first(const std::vector<Optimizer*>& optimizers) {
  Replica& first = replica(0);
  ParamArena& p = first.model().params();
  if (MpiCommunicator* workers = world()) {
    if (p.values().numel()) broadcast_tensor(first.backend(), p.values(), *workers);
    if (p.state().numel()) broadcast_tensor(first.backend(), p.state(), *workers);
    if (!optimizers.empty()) {
      for (auto& [name, slot] : optimizers[0]->slots()) broadcast_tensor(first.backend(), slot, *workers);
      double iterations = workers->rank() == 0 ? static_cast<double>(optimizers[0]->iterations()) : 0.0;
      workers->all_reduce_f64(&iterations, 1);
      optimizers[0]->set_iterations(static_cast<int64_t>(iterations));
    }
  }
  for (int r = 1; r < local_replicas(); ++r) {
    ParamArena& q = replica(r).model().params();
    if (p.values().numel()) copy_tensor(first.backend(), p.values(), replica(r).backend(), q.values());
    if (p.state().numel()) copy_tensor(first.backend(), p.state(), replica(r).backend(), q.state());
    if (optimizers.empty()) continue;
    const auto src = optimizers[0]->slots();
    const auto dst = optimizers[static_cast<size_t>(r)]->slots();
    for (size_t i = 0; i < src.size(); ++i) copy_tensor(first.backend(), src[i].second, replica(r).backend(), dst[i].second);
    optimizers[static_cast<size_t>(r)]->set_iterations(optimizers[0]->iterations());
  }
}

}  // namespace distrain
