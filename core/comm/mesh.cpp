#include "core/comm/mesh.hpp"

#include <fmt/format.h>

#include <map>

#include "core/base/error.hpp"
#include "core/comm/local_communicator.hpp"
#include "core/comm/mpi_communicator.hpp"

namespace distrain {

std::string_view axis_name(Axis axis) {
  switch (axis) {
    case Axis::data: return "data";
    case Axis::tensor: return "tensor";
    case Axis::pipeline: return "pipeline";
  }
  return "?";
}

int MeshShape::degree(Axis axis) const {
  return axis == Axis::data ? data : axis == Axis::tensor ? tensor : pipeline;
}

std::string MeshShape::str() const { return fmt::format("data {} x tensor {} x pipeline {}", data, tensor, pipeline); }

int MeshCoord::at(Axis axis) const { return axis == Axis::data ? data : axis == Axis::tensor ? tensor : pipeline; }

MeshCoord coord_of(const MeshShape& shape, int rank) {
  DT_CHECK(rank >= 0 && rank < shape.size(), "rank {} outside a mesh of {}", rank, shape.size());
  return MeshCoord{rank / shape.tensor % shape.data, rank % shape.tensor, rank / (shape.tensor * shape.data)};
}

int rank_of(const MeshShape& shape, const MeshCoord& c) {
  return (c.pipeline * shape.data + c.data) * shape.tensor + c.tensor;
}

std::vector<int> axis_group(const MeshShape& shape, int rank, Axis axis) {
  MeshCoord c = coord_of(shape, rank);
  std::vector<int> group;
  for (int i = 0; i < shape.degree(axis); ++i) {
    (axis == Axis::data ? c.data : axis == Axis::tensor ? c.tensor : c.pipeline) = i;
    group.push_back(rank_of(shape, c));
  }
  return group;
}

void check_mesh(const MeshShape& shape, int world_size, const std::string& where) {
  for (Axis a : kMeshAxes)
    DT_USER_CHECK(shape.degree(a) >= 1, "{}: strategy.{} = {}; a mesh degree is at least 1", where, axis_name(a),
                  shape.degree(a));
  DT_USER_CHECK(shape.size() == world_size,
                "{}: the mesh {} has {} ranks, but the job has {}; launch with mpirun -np {} or change the degrees", where,
                shape.str(), shape.size(), world_size, shape.size());
}

Mesh::Mesh(const MeshShape& shape, int rank, std::shared_ptr<Communicator> world, Axes axes,
           std::shared_ptr<const std::vector<std::shared_ptr<LocalGroup>>> thread_groups)
    : shape_(shape), rank_(rank), coord_(coord_of(shape, rank)), world_(std::move(world)), axes_(std::move(axes)),
      thread_groups_(std::move(thread_groups)) {}

// The group along an axis is named by its first rank (every rank's color for that axis).
Mesh Mesh::over_mpi(const MeshShape& shape, std::shared_ptr<MpiCommunicator> world) {
  check_mesh(shape, world->size(), "mesh");
  auto mpi = std::make_shared<MpiParts>();
  mpi->world = world;
  Axes axes;
  for (Axis a : kMeshAxes) {
    std::shared_ptr<MpiCommunicator> axis = world->split(axis_group(shape, world->rank(), a).front());
    if (a == Axis::tensor) axis->set_short_naps();  // its collectives run inside every layer
    mpi->axes[static_cast<size_t>(a)] = axis;
    axes[static_cast<size_t>(a)] = axis;
  }
  const int rank = world->rank();
  Mesh mesh(shape, rank, std::move(world), std::move(axes), nullptr);
  mesh.mpi_ = std::move(mpi);
  return mesh;
}

std::vector<Mesh> Mesh::over_threads(const MeshShape& shape) {
  check_mesh(shape, shape.size(), "mesh");
  const auto n = static_cast<size_t>(shape.size());
  auto groups = std::make_shared<std::vector<std::shared_ptr<LocalGroup>>>();
  auto world = groups->emplace_back(std::make_shared<LocalGroup>(shape.size()));
  std::vector<Axes> axes(n);
  for (Axis a : kMeshAxes) {
    std::map<int, std::shared_ptr<LocalGroup>> by_first_rank;
    for (int r = 0; r < shape.size(); ++r) {
      const std::vector<int> g = axis_group(shape, r, a);
      auto& group = by_first_rank[g.front()];
      if (!group) group = groups->emplace_back(std::make_shared<LocalGroup>(static_cast<int>(g.size())));
      axes[static_cast<size_t>(r)][static_cast<size_t>(a)] = std::make_shared<LocalCommunicator>(group, coord_of(shape, r).at(a));
    }
  }
  std::vector<Mesh> meshes;
  for (int r = 0; r < shape.size(); ++r)
    meshes.push_back(Mesh(shape, r, std::make_shared<LocalCommunicator>(world, r), std::move(axes[static_cast<size_t>(r)]), groups));
  return meshes;
}

Mesh Mesh::data_axis(std::shared_ptr<Communicator> data, std::vector<std::shared_ptr<LocalGroup>> local) {
  const MeshShape shape{data->size(), 1, 1};
  const int rank = data->rank();
  auto alone = [] { return std::make_shared<LocalCommunicator>(std::make_shared<LocalGroup>(1), 0); };
  Axes axes{data, alone(), alone()};  // by Axis: data, tensor, pipeline
  auto groups = std::make_shared<const std::vector<std::shared_ptr<LocalGroup>>>(std::move(local));
  return Mesh(shape, rank, std::move(data), std::move(axes), std::move(groups));
}

Mesh Mesh::staged(const HostStaging& staging, StagedCommunicator::Staged which, const Axes& gpu) const {
  auto wrap = [&](const std::shared_ptr<Communicator>& c, std::shared_ptr<Communicator> on_gpu) -> std::shared_ptr<Communicator> {
    return std::make_shared<StagedCommunicator>(c, staging, which, std::move(on_gpu));
  };
  Axes axes;
  for (size_t a = 0; a < axes.size(); ++a) axes[a] = wrap(axes_[a], gpu[a]);
  Mesh mesh(shape_, rank_, wrap(world_, nullptr), std::move(axes), thread_groups_);
  mesh.mpi_ = mpi_;
  return mesh;
}

void Mesh::abort(const std::string& why) const {
  if (thread_groups_)
    for (const auto& group : *thread_groups_) group->abort(why);
}

}  // namespace distrain
