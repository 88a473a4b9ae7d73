// The `nccl` communicator: GPU collectives on a stream of its own, ordered after the work
// already queued on the caller's compute stream, and before the work queued on it later,
// with events: the host never waits for them. (Without a compute stream it synchronises
// the device before and the NCCL stream after each collective.)
//   create_local: one process, several GPUs (ncclCommInitAll), one communicator each;
//   create_world: one rank per process, the NCCL unique id broadcast over MPI.
// NCCL refuses two ranks on one GPU; create_local says so before NCCL does.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/comm/mpi_communicator.hpp"

namespace distrain {

class NcclCommunicator final : public Communicator {
 public:
  static std::vector<std::unique_ptr<NcclCommunicator>> create_local(const std::vector<int>& devices,
                                                                      const std::vector<cudaStream_t>& compute = {});
  static std::unique_ptr<NcclCommunicator> create_world(MpiCommunicator& mpi, int device, cudaStream_t compute = nullptr);
  ~NcclCommunicator() override;

  std::string backend_name() const override { return "nccl"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

 private:
  void do_all_reduce(Tensor inout, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) override;
  void do_all_gather(const Tensor& in, Tensor out) override;
  void do_broadcast(Tensor t, int root) override;
  void do_barrier() override;

  struct Impl;
  explicit NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size);
  std::unique_ptr<Impl> impl_;
  int rank_, size_;
};

}  // namespace distrain
