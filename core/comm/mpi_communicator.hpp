// The `mpi` communicator: one process per worker (mpirun -np N, or srun), over MPI_COMM_WORLD.
// MPI is initialised only when the process was started by a launcher (mpirun, srun) or a
// strategy asks for it; distrain run by hand never touches MPI otherwise.
#pragma once
#include <memory>

#include "core/comm/communicator.hpp"

namespace distrain {

// True when a launcher started this process (OpenMPI, PMI/PMIx or Slurm variables).
bool launched_by_mpi();
// Initialises MPI once (thread level: funneled); later calls do nothing.
void ensure_mpi();
// The world rank and size when launched by MPI (0 and 1 otherwise), without initialising it.
int launcher_rank();
int launcher_size();
// Ends the whole job from any rank, so that no rank hangs waiting for a failed one.
[[noreturn]] void mpi_abort(int code);
void mpi_finalize();
// The MPI library's own version line (e.g. "Open MPI v4.1.4"); needs no initialisation.
std::string mpi_library_version();

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator();  // MPI_COMM_WORLD; initialises MPI if needed
  ~MpiCommunicator() override;
  // The ranks of this communicator that pass the same color, as a communicator of their own
  // (collective over this one).
  std::unique_ptr<MpiCommunicator> split(int color);
  std::string backend_name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(Tensor inout, ReduceOp op) override;
  void reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) override;
  void all_gather(const Tensor& in, Tensor out) override;
  void broadcast(Tensor t, int root) override;
  void barrier() override;
  // Reduction of a few doubles (metrics: sums and counts).
  void all_reduce_f64(double* values, int count);
  // Raw bytes from root to every rank (e.g. an NCCL unique id).
  void broadcast_bytes(void* data, size_t bytes, int root);

 private:
  struct Handle;  // the MPI_Comm, kept out of this header
  explicit MpiCommunicator(std::unique_ptr<Handle> handle);
  std::unique_ptr<Handle> handle_;
  int rank_ = 0, size_ = 1;
};

}  // namespace distrain
