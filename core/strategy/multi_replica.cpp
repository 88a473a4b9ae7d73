#include "core/strategy/multi_replica.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/ranges.h>

#include "core/backend/backend.hpp"
#include "core/backend/cuda_plugin.hpp"
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

MultiReplicaStrategy::MultiReplicaStrategy(const Recipe& recipe, World world, const SeamFactory& seams)
    : spec_(recipe.strategy) {
  if (world == World::always || (world == World::when_launched && launcher_size() > 1)) {
    world_ = std::make_unique<MpiCommunicator>(spec_.timeout_seconds);
    rank_ = world_->rank();
    workers_ = world_->size();
  }
  const int n = static_cast<int>(spec_.devices.size());
  group_ = std::make_shared<LocalGroup>(n);
  std::vector<Device> devices;
  std::vector<Backend*> backends;
  for (const auto& text : spec_.devices) {
    devices.push_back(Device::parse(text, recipe.file + ": strategy.devices"));
    backends.push_back(&backend_for(devices.back()));
  }
  // Communicators first: the models' gatherers and reducers are given them.
  for (int r = 0; r < n; ++r) comms_.push_back(std::make_unique<LocalCommunicator>(group_, r));
  make_gpu_communicators(devices, backends);
  make_hierarchies(backends);
  for (int r = 0; r < n; ++r) {
    const auto i = static_cast<size_t>(r);
    replicas_.push_back(std::make_unique<Replica>(recipe, *backends[i], seams ? seams(*all_[i]) : ModelSeams{}));
    ledger().add_source(*backends[i]);
    if (spec_.sync_batch_norm) replicas_.back()->set_cross_replica_sum([this, r](Tensor values) { sum_over_replicas(r, values); });
  }
  threads_ = std::make_unique<ReplicaThreads>(n, std::max(1, cpu_threads() / n),
                                              [group = group_](const std::string& why) { group->abort(why); });
}

void MultiReplicaStrategy::make_hierarchies(const std::vector<Backend*>& backends) {
  for (size_t i = 0; i < backends.size(); ++i) {
    CommLevels levels{comms_[i].get(), world_.get(), gpu_local_.empty() ? nullptr : gpu_local_[i].get(), gpu_world_.get()};
    Backend& be = *backends[i];
    HostStaging staging{[&be](const Tensor& t, void* host) { be.download(t, host); },
                        [&be](const void* host, Tensor t) { be.upload(host, t); }};
    all_.push_back(std::make_unique<HierarchicalCommunicator>(levels, std::move(staging)));
  }
}

void MultiReplicaStrategy::make_gpu_communicators(const std::vector<Device>& devices, const std::vector<Backend*>& backends) {
  const bool all_cuda = std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
  const bool shared_gpu = shares_a_gpu(devices);  // with nccl, the recipe was refused (parse_strategy)
  const std::string& ops = spec_.cross_device_ops;
  const bool nccl_local = all_cuda && !shared_gpu && devices.size() > 1 && (ops == "nccl" || ops == "auto");
  // As tf.distribute: NCCL between workers when asked, or by default with one GPU per worker.
  const bool one_gpu = all_cuda && devices.size() == 1;
  const bool nccl_world = world_ && (spec_.communication == "nccl" || (spec_.communication == "auto" && one_gpu));
  DT_USER_CHECK(!nccl_world || one_gpu,
                "strategy.communication = \"nccl\" takes one cuda device per worker, got [{}]", fmt::join(spec_.devices, ", "));
  if (nccl_local) gpu_local_ = cuda_plugin().nccl_local(backends);
  if (nccl_world) gpu_world_ = cuda_plugin().nccl_world(*world_, *backends[0]);
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
  return world_ ? sum_over_workers(local, *world_) : local;
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
  if (world_) world_->all_reduce_f64(sums.data(), static_cast<int>(sums.size()));  // each slot has one writer
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
  if (world_) {
    if (p.values().numel()) broadcast_tensor(first.backend(), p.values(), *world_);
    if (p.state().numel()) broadcast_tensor(first.backend(), p.state(), *world_);
    if (!optimizers.empty()) {
      for (auto& [name, slot] : optimizers[0]->slots()) broadcast_tensor(first.backend(), slot, *world_);
      double iterations = world_->rank() == 0 ? static_cast<double>(optimizers[0]->iterations()) : 0.0;
      world_->all_reduce_f64(&iterations, 1);
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
