// Mesh: the ranks of a job on named axes `data`, `tensor`, `pipeline`, whose degrees
// multiply to the world size. Layout as Megatron and torchtitan: tensor innermost
// (neighbouring ranks share the fastest links), then data, pipeline outermost:
//   rank = (pipeline * data_degree + data) * tensor_degree + tensor.
// A rank's group along an axis is every rank that differs from it only in that axis's
// coordinate, ordered by that coordinate; the mesh owns one communicator per axis, split
// from the world, and strategies ask it for them rather than building groups of their own.
// A Mesh is one rank's view; copies share its communicators. The ranks are MPI processes
// (a job's), threads of one process (in-process tests of every mesh layout), or the
// replicas of data-parallel strategies, threads of several processes on the data axis
// alone (core/strategy/replica_mesh.hpp).
#pragma once
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/comm/communicator.hpp"
#include "core/comm/staged_communicator.hpp"

namespace distrain {

class LocalGroup;
class MpiCommunicator;

enum class Axis { data, tensor, pipeline };
constexpr std::array<Axis, 3> kMeshAxes{Axis::data, Axis::tensor, Axis::pipeline};
std::string_view axis_name(Axis axis);

struct MeshShape {
  int data = 1, tensor = 1, pipeline = 1;
  int size() const { return data * tensor * pipeline; }
  int degree(Axis axis) const;
  std::string str() const;  // "data 2 x tensor 2 x pipeline 1"
  bool operator==(const MeshShape&) const = default;
};

struct MeshCoord {
  int data = 0, tensor = 0, pipeline = 0;
  int at(Axis axis) const;
  bool operator==(const MeshCoord&) const = default;
};

MeshCoord coord_of(const MeshShape& shape, int rank);
int rank_of(const MeshShape& shape, const MeshCoord& coord);
// The world ranks of `rank`'s group along `axis`, in that axis's order (rank's own included).
std::vector<int> axis_group(const MeshShape& shape, int rank, Axis axis);
// Throws UserError naming `where` unless every degree is >= 1 and their product is
// `world_size`.
void check_mesh(const MeshShape& shape, int world_size, const std::string& where);

class Mesh {
 public:
  // This process's place in a mesh of MPI processes (collective over `world`).
  static Mesh over_mpi(const MeshShape& shape, std::shared_ptr<MpiCommunicator> world);
  // A mesh of threads in one process: element r is rank r's view (its communicators are
  // for that rank's thread only).
  static std::vector<Mesh> over_threads(const MeshShape& shape);
  // A mesh of the data axis alone (tensor = pipeline = 1), as rank `data.rank()` of
  // `data` sees it: its world is that axis. `local` are the thread groups inside `data`
  // (owned by its maker, which keeps `data`'s levels alive), aborted by abort().
  static Mesh data_axis(std::shared_ptr<Communicator> data, std::vector<std::shared_ptr<LocalGroup>> local);

  using Axes = std::array<std::shared_ptr<Communicator>, 3>;  // by Axis
  // This rank's view with every communicator wrapped to carry device tensors through host
  // memory (StagedCommunicator, each with its own copy of `staging`): a mesh of GPU ranks
  // over MPI or threads. An axis given a GPU communicator in `gpu` (NCCL over that axis's
  // ranks) runs its GPU collectives there.
  Mesh staged(const HostStaging& staging, StagedCommunicator::Staged which = StagedCommunicator::Staged::gpu_tensors,
              const Axes& gpu = {}) const;

  const MeshShape& shape() const { return shape_; }
  int rank() const { return rank_; }
  const MeshCoord& coord() const { return coord_; }
  // The communicator of this rank's group along `axis` (its rank there is coord().at(axis)).
  Communicator& axis(Axis axis) const { return *axes_[static_cast<size_t>(axis)]; }
  // Every rank of the mesh (its rank there is rank()): agreement on stops, global sums.
  Communicator& world() const { return *world_; }
  // A mesh of MPI processes: the MPI communicators under world() and axis() (null for a
  // mesh of threads), from which NCCL communicators over the same ranks are made.
  MpiCommunicator* mpi_world() const { return mpi_ ? mpi_->world.get() : nullptr; }
  MpiCommunicator* mpi_axis(Axis axis) const { return mpi_ ? mpi_->axes[static_cast<size_t>(axis)].get() : nullptr; }
  // A thread mesh: every group of it marked failed, so each rank waiting in one wakes and
  // throws GroupAborted. Over MPI nothing: the job's one catch site ends every process.
  void abort(const std::string& why) const;

 private:
  struct MpiParts {
    std::shared_ptr<MpiCommunicator> world;
    std::array<std::shared_ptr<MpiCommunicator>, 3> axes;  // by Axis
  };
  Mesh(const MeshShape& shape, int rank, std::shared_ptr<Communicator> world, Axes axes,
       std::shared_ptr<const std::vector<std::shared_ptr<LocalGroup>>> thread_groups);

  MeshShape shape_;
  int rank_ = 0;
  MeshCoord coord_;
  std::shared_ptr<Communicator> world_;
  Axes axes_;
  std::shared_ptr<const std::vector<std::shared_ptr<LocalGroup>>> thread_groups_;  // a thread mesh's, else null
  std::shared_ptr<const MpiParts> mpi_;  // an MPI mesh's, else null
};

}  // namespace distrain
