// HierarchicalCommunicator: one replica's view of every replica of a job, in two levels:
// the replicas of this process (threads over `local`, or NCCL among distinct GPUs) and the
// processes of the job (the MPI world, or NCCL with one GPU per process). Its rank is
// world rank x group size + group rank, so ranks of one process are neighbours.
//
// all_reduce: the group reduces, its leader (group rank 0) reduces over the world, the
// leader broadcasts back to its group. Only the leader calls the world, on its own thread,
// which is the process's main thread (MPI_THREAD_FUNNELED). GPU tensors go over NCCL where
// there is NCCL (the whole job, or the group with the leader's world step on a host copy),
// else the whole reduction runs on a host copy. Sums keep a fixed order, so results are
// the same run to run.
//
// reduce_scatter and all_gather span one level (one replica per process, or one process),
// which is all ZeRO asks. This is the hierarchy a mesh splits by axis.
#pragma once
#include "core/comm/communicator.hpp"
#include "core/comm/host_staging.hpp"

namespace distrain {

// The communicators of the two levels, owned elsewhere; those absent are null.
struct CommLevels {
  Communicator* group = nullptr;      // this process's replicas, host memory (required)
  Communicator* world = nullptr;      // one rank per process (MPI); only the group's leader calls it
  Communicator* gpu_group = nullptr;  // NCCL among this process's replicas (distinct GPUs)
  Communicator* gpu_world = nullptr;  // NCCL among every process, one GPU each
};

class HierarchicalCommunicator final : public Communicator {
 public:
  HierarchicalCommunicator(CommLevels levels, HostStaging staging);

  std::string backend_name() const override { return "hierarchical"; }
  int rank() const override;
  int size() const override;

 private:
  void do_all_reduce(Tensor inout, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) override;
  void do_all_gather(const Tensor& in, Tensor out) override;
  void do_broadcast(Tensor t, int root) override;
  void do_barrier() override;

  bool leader() const { return group_.rank() == 0; }
  void host_all_reduce(Tensor t, ReduceOp op);
  void host_broadcast(Tensor t, int root);
  Communicator& one_level(const char* op) const;
  Communicator* gpu_one_level() const;

  Communicator& group_;
  Communicator* world_;
  Communicator* gpu_group_;
  Communicator* gpu_world_;
  HostStaging staging_;  // GPU tensors a host level must carry
};

}  // namespace distrain
