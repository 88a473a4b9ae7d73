#include "core/strategy/replica_sync.hpp"

#include <vector>

#include "core/base/rng.hpp"

namespace distrain {

namespace {

void copy_tensor(Backend& from_be, const Tensor& from, Backend& to_be, Tensor to) {
  std::vector<float> host(static_cast<size_t>(from.numel()));
  from_be.download(from, host.data());
  to_be.upload(host.data(), to);
}

// Broadcasts a device tensor from worker 0 through a host copy.
void broadcast_tensor(Backend& be, Tensor t, MpiCommunicator& world) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  be.download(t, host.data());
  world.broadcast(Tensor{host.data(), t.shape, DType::f32, Device{}}, 0);
  be.upload(host.data(), t);
}

}  // namespace

void copy_replica(Replica& from, Optimizer& from_opt, Replica& to, Optimizer& to_opt) {
  const ParamArena& a = from.model().params();
  ParamArena& b = to.model().params();
  copy_tensor(from.backend(), a.values(), to.backend(), b.values());
  if (a.state().numel()) copy_tensor(from.backend(), a.state(), to.backend(), b.state());
  const auto src = from_opt.slots();
  const auto dst = to_opt.slots();
  for (size_t i = 0; i < src.size(); ++i) copy_tensor(from.backend(), src[i].second, to.backend(), dst[i].second);
  to_opt.set_iterations(from_opt.iterations());
}

void broadcast_from_first(Replica& replica, Optimizer& optimizer, MpiCommunicator& world) {
  ParamArena& p = replica.model().params();
  broadcast_tensor(replica.backend(), p.values(), world);
  if (p.state().numel()) broadcast_tensor(replica.backend(), p.state(), world);
  for (auto& [name, slot] : optimizer.slots()) broadcast_tensor(replica.backend(), slot, world);
  double iterations = world.rank() == 0 ? static_cast<double>(optimizer.iterations()) : 0.0;
  world.all_reduce_f64(&iterations, 1);
  optimizer.set_iterations(static_cast<int64_t>(iterations));
}

double checksum(Model& model) {
  const Tensor v = model.params().values();
  std::vector<float> host(static_cast<size_t>(v.numel()));
  model.backend().download(v, host.data());
  double s = 0.0;
  for (float x : host) s += x;
  return s;
}

void check_checksums(const std::vector<double>& sums, int replicas_per_worker, int64_t step) {
  for (size_t r = 1; r < sums.size(); ++r)
    if (sums[r] != sums[0])
      throw Error(fmt::format("replica {} (worker {}) diverged from replica 0 at step {}: parameter checksum {:.17g} vs {:.17g}",
                              r, static_cast<int>(r) / replicas_per_worker, step, sums[r], sums[0]));
}

LossStats compute_replica_gradients(ReplicaThreads& threads, std::vector<std::unique_ptr<Replica>>& replicas,
                                    const Batch& batch, uint64_t step_seed, int first_replica) {
  std::vector<LossStats> stats(replicas.size());
  const float grad_scale = 1.0f / static_cast<float>(batch.global_count);
  threads.run([&](int r) {
    Replica& rep = *replicas[static_cast<size_t>(r)];
    rep.model().zero_grads();
    stats[static_cast<size_t>(r)] = rep.forward_backward(batch.replicas.at(static_cast<size_t>(r)), grad_scale,
                                                         derive_seed(step_seed, static_cast<uint64_t>(first_replica + r)));
  });
  LossStats total;
  for (const auto& s : stats) total += s;
  return total;
}

LossStats sum_over_workers(LossStats local, MpiCommunicator& world) {
  double v[3] = {local.loss_sum, static_cast<double>(local.correct), static_cast<double>(local.count)};
  world.all_reduce_f64(v, 3);
  return LossStats{v[0], static_cast<int64_t>(v[1]), static_cast<int64_t>(v[2])};
}

}  // namespace distrain
