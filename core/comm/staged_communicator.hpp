// StagedCommunicator: a communicator that moves host memory (MPI, threads), made to carry
// device tensors too. Each GPU tensor is copied to a host buffer, moved by the host
// communicator and copied back; host tensors pass straight through. This is how a mesh's
// axes carry GPU activations and gradients when ranks share a GPU (NCCL refuses two ranks
// on one GPU); MPI need not be CUDA-aware. A send's copy is kept until its wait_send.
// Given a GPU communicator over the same ranks (NCCL, where they have distinct GPUs), GPU
// tensors' collectives go there instead, and only messages through host memory.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/comm/host_staging.hpp"

namespace distrain {

class StagedCommunicator final : public Communicator {
 public:
  // every_tensor: host tensors take the staged path too, so that tests run it on CPU devices.
  enum class Staged { gpu_tensors, every_tensor };
  StagedCommunicator(std::shared_ptr<Communicator> host, HostStaging staging, Staged staged = Staged::gpu_tensors,
                     std::shared_ptr<Communicator> gpu = nullptr);

  // "mpi, GPU tensors through host memory" or "nccl, messages over mpi through host memory".
  std::string backend_name() const override;
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  int64_t start_send(const Tensor& t, int peer, int tag, std::string_view what) override;
  void wait_send(int64_t id) override;
  void recv(Tensor t, int peer, int tag, std::string_view what) override;
  void progress() override { host_->progress(); }

 private:
  void do_all_reduce(Tensor inout, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) override;
  void do_all_gather(const Tensor& in, Tensor out) override;
  void do_broadcast(Tensor t, int root) override;
  void do_barrier() override { host_->barrier(); }

  bool staged(const Tensor& t) const { return staged_ == Staged::every_tensor || t.device.is_cuda(); }

  std::shared_ptr<Communicator> host_;
  std::shared_ptr<Communicator> gpu_;  // collectives of staged tensors, when set
  HostStaging staging_;
  Staged staged_;
  std::map<int64_t, std::vector<char>> sending_;  // by send id: the host copy a send reads
  std::vector<char> receiving_;
};

}  // namespace distrain
