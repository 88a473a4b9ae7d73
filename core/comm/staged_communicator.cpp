#include "core/comm/staged_communicator.hpp"

#include "core/base/error.hpp"

namespace distrain {

StagedCommunicator::StagedCommunicator(std::shared_ptr<Communicator> host, HostStaging staging, Staged staged,
                                       std::shared_ptr<Communicator> gpu)
    : host_(std::move(host)), gpu_(std::move(gpu)), staging_(std::move(staging)), staged_(staged) {
  DT_CHECK(host_, "a staged communicator needs a host communicator");
  DT_CHECK(!gpu_ || (gpu_->size() == host_->size() && gpu_->rank() == host_->rank()),
           "a staged communicator's GPU communicator is rank {} of {}, its host one rank {} of {}", gpu_->rank(),
           gpu_->size(), host_->rank(), host_->size());
}

std::string StagedCommunicator::backend_name() const {
  if (gpu_) return gpu_->backend_name() + ", messages over " + host_->backend_name() + " through host memory";
  return host_->backend_name() + ", GPU tensors through host memory";
}

void StagedCommunicator::do_all_reduce(Tensor t, ReduceOp op) {
  if (!staged(t)) return host_->all_reduce(t, op);
  if (gpu_) return gpu_->all_reduce(t, op);
  staging_.through_host(t, [&](Tensor h) { host_->all_reduce(h, op); });
}

void StagedCommunicator::do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) {
  if (!staged(in)) return host_->reduce_scatter(in, out, op);
  if (gpu_) return gpu_->reduce_scatter(in, out, op);
  staging_.through_host(in, out, [&](const Tensor& i, Tensor o) { host_->reduce_scatter(i, o, op); });
}

void StagedCommunicator::do_all_gather(const Tensor& in, Tensor out) {
  if (!staged(in)) return host_->all_gather(in, out);
  if (gpu_) return gpu_->all_gather(in, out);
  staging_.through_host(in, out, [&](const Tensor& i, Tensor o) { host_->all_gather(i, o); });
}

void StagedCommunicator::do_broadcast(Tensor t, int root) {
  if (!staged(t)) return host_->broadcast(t, root);
  if (gpu_) return gpu_->broadcast(t, root);
  staging_.through_host(t, [&](Tensor h) { host_->broadcast(h, root); });
}

int64_t StagedCommunicator::start_send(const Tensor& t, int peer, int tag, std::string_view what) {
  if (!staged(t)) return host_->start_send(t, peer, tag, what);
  std::vector<char> copy;
  const Tensor host = staging_.copy_to_host(t, copy);
  const int64_t id = host_->start_send(host, peer, tag, what);
  if (id != 0) sending_.emplace(id, std::move(copy));  // 0: already sent, the copy is free
  return id;
}

void StagedCommunicator::wait_send(int64_t id) {
  host_->wait_send(id);
  sending_.erase(id);
}

void StagedCommunicator::recv(Tensor t, int peer, int tag, std::string_view what) {
  if (!staged(t)) return host_->recv(t, peer, tag, what);
  const Tensor host = HostStaging::host_view(t, receiving_);
  host_->recv(host, peer, tag, what);
  staging_.copy_from_host(receiving_.data(), t);
}

}  // namespace distrain
