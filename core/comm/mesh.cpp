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

Mesh::Mesh(const MeshShape& shape, int rank, std::array<std::unique_ptr<Communicator>, 3> axes)
    : shape_(shape), rank_(rank), coord_(coord_of(shape, rank)), axes_(std::move(axes)) {}

// The group along an axis is named by its first rank (every rank's color for that axis).
Mesh Mesh::over_mpi(const MeshShape& shape, MpiCommunicator& world) {
  check_mesh(shape, world.size(), "mesh");
  std::array<std::unique_ptr<Communicator>, 3> axes;
  for (Axis a : kMeshAxes) axes[static_cast<size_t>(a)] = world.split(axis_group(shape, world.rank(), a).front());
  return Mesh(shape, world.rank(), std::move(axes));
}

std::vector<Mesh> Mesh::over_threads(const MeshShape& shape) {
  check_mesh(shape, shape.size(), "mesh");
  std::vector<std::array<std::unique_ptr<Communicator>, 3>> axes(static_cast<size_t>(shape.size()));
  for (Axis a : kMeshAxes) {
    std::map<int, std::shared_ptr<LocalGroup>> groups;  // by first rank
    for (int r = 0; r < shape.size(); ++r) {
      const std::vector<int> g = axis_group(shape, r, a);
      auto& group = groups[g.front()];
      if (!group) group = std::make_shared<LocalGroup>(static_cast<int>(g.size()));
      axes[static_cast<size_t>(r)][static_cast<size_t>(a)] =
          std::make_unique<LocalCommunicator>(group, coord_of(shape, r).at(a));
    }
  }
  std::vector<Mesh> meshes;
  for (int r = 0; r < shape.size(); ++r) meshes.push_back(Mesh(shape, r, std::move(axes[static_cast<size_t>(r)])));
  return meshes;
}

}  // namespace distrain
