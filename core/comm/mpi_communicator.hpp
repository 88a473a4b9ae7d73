// The `mpi` communicator: one process per worker (mpirun -np N, or srun), over MPI_COMM_WORLD.
// MPI is initialised only when the process was started by a launcher (mpirun, srun) or a
// strategy asks for it; distrain run by hand never touches MPI otherwise.
//
// A rank that stops responding (SIGSTOP, a hung driver) is not reported by the launcher,
// which only sees deaths: every collective here is non-blocking and waited for with a
// deadline (set_timeout), and on expiry throws a UserError naming the collective and the
// ranks that had not entered it. Each rank publishes how many collectives it has entered
// in a one-slot MPI window; the waiting rank reads the others' slots without their help.
// Point-to-point messages (the parameter server's; pipeline stages later) are bounded by
// the same deadline and name the peer and the message they waited for.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/comm/communicator.hpp"

namespace distrain {

// True when a launcher started this process (OpenMPI, PMI/PMIx or Slurm variables).
bool launched_by_mpi();
// Initialises MPI once (thread level: funneled); later calls do nothing.
void ensure_mpi();
// Under a launcher: MPI's world must be the size the launcher started (srun without a PMI
// plugin starts N singletons of size 1), and torchrun's variables alone launch nothing
// distrain can join. UserError saying how to launch otherwise.
void check_launch();
// The world rank and size when launched by MPI (0 and 1 otherwise), without initialising it.
int launcher_rank();
int launcher_size();
// This process's rank among those the launcher started on its host (0 without a launcher;
// none when the launcher does not say), and their number (1 without a launcher).
std::optional<int> launcher_local_rank();
int launcher_local_size();
// Ends the whole job from any rank, so that no rank hangs waiting for a failed one.
[[noreturn]] void mpi_abort(int code);
void mpi_finalize();
// The MPI library's own version line (e.g. "Open MPI v4.1.4"); needs no initialisation.
std::string mpi_library_version();

class MpiCommunicator final : public Communicator {
 public:
  // MPI_COMM_WORLD; initialises MPI if needed. Given the job's timeout here, every
  // communicator split from it (a mesh's axes) has it too.
  explicit MpiCommunicator(double timeout_seconds = 0.0);
  ~MpiCommunicator() override;
  // The ranks of this communicator that pass the same color, as a communicator of their own
  // (collective over this one).
  std::unique_ptr<MpiCommunicator> split(int color);
  // The ranks of this communicator on this rank's host (shared memory), likewise.
  std::unique_ptr<MpiCommunicator> split_by_host();
  // Whether two ranks on one host passed the same value (a GPU's PCI location: NCCL refuses
  // two ranks on one GPU); collective, every rank gets the same answer.
  bool any_equal_on_a_host(int value);
  // Collectives that do not complete within `seconds` throw UserError (0: wait forever).
  void set_timeout(double seconds) { timeout_s_ = seconds; }
  // A wait polls for 2 ms, then sleeps between tests, backing off to a nap of at most 1 ms
  // (kLongNap): ranks waiting for a slow one leave the cores to it. A pipeline's messages
  // (start_send, wait_send, recv) and, after this call, this communicator's collectives
  // back off to kShortNap instead. For the tensor axis, whose collectives run inside every
  // layer's forward and backward, dozens a step: each nap that oversleeps delays the step.
  void set_short_naps() { collective_nap_ = kShortNap; }
  static constexpr std::chrono::microseconds kLongNap{1000}, kShortNap{50};
  std::string backend_name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  // This rank's and another member's rank in MPI_COMM_WORLD, which messages name.
  int world_rank(int rank) const;
  int size() const override { return size_; }
  // Reduction of a few doubles (metrics: sums and counts).
  void all_reduce_f64(double* values, int count);
  // Raw bytes from root to every rank (e.g. an NCCL unique id).
  void broadcast_bytes(void* data, size_t bytes, int root);

  // Point-to-point on host tensors (float32 or float64). `tag` tells message kinds apart;
  // `what` describes the message for the error a deadline throws ("the parameters of
  // step 12"). A send completes when the peer has taken the message (or MPI buffered it).
  void send(const Tensor& t, int peer, int tag, std::string_view what);
  void recv(Tensor t, int peer, int tag, std::string_view what) override;
  int64_t start_send(const Tensor& t, int peer, int tag, std::string_view what) override;
  void wait_send(int64_t id) override;
  void progress() override;
  struct Incoming {
    int source = -1, tag = -1;
  };
  // The next message for this rank, from any peer, not yet received (recv it next);
  // nullopt when none came within `seconds` (<= 0: wait forever). The caller decides
  // what silence means, and may fail().
  std::optional<Incoming> probe(double seconds);
  double timeout() const { return timeout_s_; }
  // Gives up on the job: throws UserError("rank R: <why>") and leaves this communicator
  // to the abort that follows (its destructor then frees nothing collectively).
  [[noreturn]] void fail(const std::string& why);

 private:
  void do_all_reduce(Tensor inout, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) override;
  void do_all_gather(const Tensor& in, Tensor out) override;
  void do_broadcast(Tensor t, int root) override;
  void do_barrier() override;

  struct Handle;  // the MPI_Comm and the collective counters, kept out of this header
  explicit MpiCommunicator(std::unique_ptr<Handle> handle);
  // A communicator split from this one (its handle's comm), with this one's error handler and timeout.
  std::unique_ptr<MpiCommunicator> adopt(std::unique_ptr<Handle> h);
  void init();  // rank, size, the counters (collective)
  // Counts the collective and publishes the count before `start` posts it, then waits.
  template <class Start>
  void run(const char* name, Start&& start);
  [[noreturn]] void timed_out(const char* name, int64_t seq);
  [[noreturn]] void message_timed_out(std::string_view what, int peer);
  static constexpr int64_t kNoAnswer = -1;
  static constexpr std::chrono::seconds kRollCallWait{3};
  std::vector<int64_t> read_counters();
  std::vector<int64_t> roll_call();
  std::string who_is_missing(int64_t seq);
  std::unique_ptr<Handle> handle_;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 0.0;
  int64_t seq_ = 0;  // collectives entered on this communicator
  std::chrono::microseconds collective_nap_ = kLongNap;
};

}  // namespace distrain
