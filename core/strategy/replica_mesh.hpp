// ReplicaMesh: the data axis that mirrored, multi_worker_mirrored, central_storage and zero
// are given, one Mesh per replica of this process (data = every replica of the job, tensor
// = pipeline = 1). This process runs one replica per device of strategy.devices, each on
// its own thread; under a launcher an MPI world joins the processes (the "workers").
// A replica's data axis is a HierarchicalCommunicator over the two levels, with NCCL where
// the GPUs allow it: among distinct GPUs of this process, and between workers of one GPU
// each (as tf.distribute: when asked, or by default; not when workers share a GPU, which
// NCCL refuses: then through host memory). The strategies differ only in what
// they do over it (the reducer and gatherer they give the model, who updates what).
// It owns every communicator its meshes use: keep it as long as they are used.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/comm/hierarchical_communicator.hpp"
#include "core/comm/local_communicator.hpp"
#include "core/comm/mesh.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "core/io/recipe.hpp"

namespace distrain {

class Backend;

class ReplicaMesh {
 public:
  // Whether the processes of a launch are joined: never (one-process strategies), when
  // more than one was launched, or always (an MPI world even of one process).
  enum class Workers { none, when_launched, always };
  ReplicaMesh(const Recipe& recipe, Workers workers);

  int local_replicas() const { return static_cast<int>(meshes_.size()); }
  // Replica r's view: its rank there is its index in the job (worker x local + r).
  const Mesh& replica(int r) const { return meshes_.at(static_cast<size_t>(r)); }
  Backend& backend(int r) const { return *backends_.at(static_cast<size_t>(r)); }
  // One rank per process (called from the main thread only); null without workers.
  MpiCommunicator* workers() const { return workers_.get(); }
  // Wakes every local replica waiting in a collective (each throws GroupAborted).
  void abort(const std::string& why) const { meshes_.front().abort(why); }

 private:
  void make_gpu_levels(const std::vector<Device>& devices, const StrategySpec& spec);

  std::vector<Backend*> backends_;
  std::unique_ptr<MpiCommunicator> workers_;
  std::vector<std::unique_ptr<LocalCommunicator>> local_;
  std::vector<std::unique_ptr<Communicator>> gpu_local_;  // NCCL among this process's GPUs, or empty
  std::unique_ptr<Communicator> gpu_workers_;             // NCCL among workers of one GPU each, or null
  std::vector<Mesh> meshes_;
};

}  // namespace distrain
