// Communicator: collectives among the ranks of a group (threads of one process, MPI
// processes, or GPUs under NCCL). Counts and types come from the tensors, never from
// separate arguments. Every rank calls the same collectives in the same order.
//
// Contracts: all_reduce is in place; reduce_scatter takes in (size x n) and leaves rank
// r with block r (n) of the reduction; all_gather takes in (n) from every rank and gives
// out (size x n), rank-major; broadcast copies root's tensor to every rank. An operation
// a backend cannot do fails with the backend's name in the message.
#pragma once
#include <string>

#include "core/tensor/tensor.hpp"

namespace distrain {

enum class ReduceOp { sum, max };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string backend_name() const = 0;  // "local", "mpi", "nccl"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void all_reduce(Tensor inout, ReduceOp op) = 0;
  virtual void reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) = 0;
  virtual void all_gather(const Tensor& in, Tensor out) = 0;
  virtual void broadcast(Tensor t, int root) = 0;
  virtual void barrier() = 0;
};

}  // namespace distrain
