// Communicator: collectives among the ranks of a group (threads of one process, MPI
// processes, or GPUs under NCCL). Counts and types come from the tensors, never from
// separate arguments. Every rank calls the same collectives in the same order.
//
// Contracts: all_reduce is in place; reduce_scatter takes in (size x n) and leaves rank
// r with block r (n) of the reduction; all_gather takes in (n) from every rank and gives
// out (size x n), rank-major, float32 or bf16 (a copy: ZeRO's values under bf16);
// broadcast copies root's tensor to every rank. An operation a backend cannot do fails
// with the backend's name in the message.
//
// Every collective is counted here, once per call on this rank, whatever the backend does
// underneath (traffic()), so that `distrain bench` can set bytes moved beside the theory.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor/tensor.hpp"

namespace distrain {

enum class ReduceOp { sum, max };

// What one rank of a communicator sent, by the bus-bytes convention of nccl-tests (what
// each rank sends in a ring): all_reduce 2(n-1)/n of the tensor; reduce_scatter,
// all_gather and broadcast (n-1)/n of the whole (size x n) tensor; barriers nothing.
struct CommTraffic {
  int64_t collectives = 0;
  double bytes = 0;
  CommTraffic operator-(const CommTraffic& before) const { return {collectives - before.collectives, bytes - before.bytes}; }
  CommTraffic operator+(const CommTraffic& other) const { return {collectives + other.collectives, bytes + other.bytes}; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string backend_name() const = 0;  // "local", "mpi", "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;

  void all_reduce(Tensor inout, ReduceOp op) {
    count(2.0 * static_cast<double>(inout.bytes()));
    do_all_reduce(inout, op);
  }
  void reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) {
    count(static_cast<double>(in.bytes()));
    do_reduce_scatter(in, out, op);
  }
  void all_gather(const Tensor& in, Tensor out) {
    count(static_cast<double>(out.bytes()));
    do_all_gather(in, out);
  }
  void broadcast(Tensor t, int root) {
    count(static_cast<double>(t.bytes()));
    do_broadcast(t, root);
  }
  void barrier() { do_barrier(); }

  // Point-to-point between two ranks (pipeline stages). start_send returns at once; t must
  // stay as it is until wait_send(id) returns (at once for 0 or a finished send). recv
  // blocks until the message from `peer` with `tag` is in t, which has the sent element
  // count. Messages from one rank to another with one tag arrive in the order sent. `what`
  // names the message in errors. Not counted in traffic(); a backend without them throws.
  virtual int64_t start_send(const Tensor& t, int peer, int tag, std::string_view what);
  virtual void wait_send(int64_t id);
  virtual void recv(Tensor t, int peer, int tag, std::string_view what);
  // Moves the sends in flight on while this rank computes, called between layers: MPI over
  // TCP moves a message past its first fragment only inside an MPI call, so without it a
  // stage's activations would wait for the stage's next receive, a micro-batch later.
  virtual void progress() {}

  // An all_gather's types (float32 or bf16, the same in and out) and counts (out = size x in),
  // for the backends' do_all_gather; `backend` names it in errors.
  void check_gathered(const Tensor& in, const Tensor& out, const char* backend) const;

  // Everything counted on this rank since the communicator was made.
  const CommTraffic& traffic() const { return traffic_; }

 protected:
  virtual void do_all_reduce(Tensor inout, ReduceOp op) = 0;
  virtual void do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) = 0;
  virtual void do_all_gather(const Tensor& in, Tensor out) = 0;
  virtual void do_broadcast(Tensor t, int root) = 0;
  virtual void do_barrier() = 0;

 private:
  // `whole` bytes of which each rank sends the share (n-1)/n (times 2 for all_reduce).
  void count(double whole) {
    const int n = size();
    ++traffic_.collectives;
    traffic_.bytes += n > 1 ? whole * (n - 1) / n : 0.0;
  }
  CommTraffic traffic_;
};

}  // namespace distrain
