#include "core/comm/hierarchical_communicator.hpp"

#include "core/base/error.hpp"

namespace distrain {

namespace {
Communicator& required(Communicator* group) {
  DT_CHECK(group, "hierarchical communicator without a group communicator");
  return *group;
}
}  // namespace

HierarchicalCommunicator::HierarchicalCommunicator(CommLevels levels, HostStaging staging)
    : group_(required(levels.group)),
      world_(levels.world),
      gpu_group_(levels.gpu_group),
      gpu_world_(levels.gpu_world),
      staging_(std::move(staging)) {}

int HierarchicalCommunicator::rank() const { return (world_ ? world_->rank() * group_.size() : 0) + group_.rank(); }

int HierarchicalCommunicator::size() const { return group_.size() * (world_ ? world_->size() : 1); }

void HierarchicalCommunicator::host_all_reduce(Tensor t, ReduceOp op) {
  group_.all_reduce(t, op);
  if (!world_) return;
  if (leader()) world_->all_reduce(t, op);
  group_.broadcast(t, 0);
}

void HierarchicalCommunicator::do_all_reduce(Tensor t, ReduceOp op) {
  if (!t.device.is_cuda()) return host_all_reduce(t, op);
  if (gpu_world_) return gpu_world_->all_reduce(t, op);  // one replica per process, every process in one NCCL
  if (gpu_group_) {
    gpu_group_->all_reduce(t, op);
    if (!world_) return;
    if (leader()) staging_.through_host(t, [&](Tensor h) { world_->all_reduce(h, op); });
    gpu_group_->broadcast(t, 0);
    return;
  }
  staging_.through_host(t, [&](Tensor h) { host_all_reduce(h, op); });
}

// reduce_scatter and all_gather span one level: the whole job is either this process's group
// or one replica per process.
Communicator& HierarchicalCommunicator::one_level(const char* op) const {
  if (!world_) return group_;
  DT_CHECK(group_.size() == 1, "the hierarchical communicator does not support {} over {} processes x {} replicas", op,
           world_->size(), group_.size());
  return *world_;
}

// NCCL over the same level, if there is one.
Communicator* HierarchicalCommunicator::gpu_one_level() const { return gpu_world_ ? gpu_world_ : world_ ? nullptr : gpu_group_; }

void HierarchicalCommunicator::do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) {
  Communicator& host = one_level("reduce_scatter");
  if (!in.device.is_cuda()) return host.reduce_scatter(in, out, op);
  if (Communicator* gpu = gpu_one_level()) return gpu->reduce_scatter(in, out, op);
  staging_.through_host(in, out, [&](const Tensor& i, Tensor o) { host.reduce_scatter(i, o, op); });
}

void HierarchicalCommunicator::do_all_gather(const Tensor& in, Tensor out) {
  Communicator& host = one_level("all_gather");
  if (!in.device.is_cuda()) return host.all_gather(in, out);
  if (Communicator* gpu = gpu_one_level()) return gpu->all_gather(in, out);
  staging_.through_host(in, out, [&](const Tensor& i, Tensor o) { host.all_gather(i, o); });
}

// Root's group hands it to its leader, the leaders pass it over the world, each leader to its group.
void HierarchicalCommunicator::host_broadcast(Tensor t, int root) {
  const int n = group_.size();
  if (!world_) return group_.broadcast(t, root);
  if (root / n == world_->rank()) group_.broadcast(t, root % n);
  if (leader()) world_->broadcast(t, root / n);
  group_.broadcast(t, 0);
}

void HierarchicalCommunicator::do_broadcast(Tensor t, int root) {
  DT_CHECK(root >= 0 && root < size(), "broadcast root {} of {}", root, size());
  if (!t.device.is_cuda()) return host_broadcast(t, root);
  if (gpu_world_) return gpu_world_->broadcast(t, root);
  staging_.through_host(t, [&](Tensor h) { host_broadcast(h, root); });
}

void HierarchicalCommunicator::do_barrier() {
  group_.barrier();
  if (world_ && leader()) world_->barrier();
  group_.barrier();
}

}  // namespace distrain
