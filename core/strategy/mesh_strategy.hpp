// mesh: one process per device (mpirun -np N), the ranks on a device mesh with axes data,
// tensor and pipeline (core/comm/mesh.hpp), N = data x tensor x pipeline.
//   data    replicas: each data rank takes its slice of the global batch; gradients are
//           summed over the data axis;
//   tensor  the model's layers split over the tensor ranks as core/model/tensor_plan.hpp
//           says (Megatron's column/row pairs); the ranks of one tensor group see the same
//           examples, and each holds and updates only its slices of the split variables;
//   pipeline  the axis exists; pipeline stages are not built yet (the recipe refuses > 1).
// Checkpoints hold whole variables: saving gathers each split variable over the tensor
// axis, loading slices it, so a checkpoint moves between this and any other strategy.
// CPU devices in this version (the tensor-axis exchanges go through MPI on the host).
#pragma once
#include "core/strategy/strategy.hpp"

namespace distrain {

std::unique_ptr<Strategy> make_mesh_strategy(const Recipe& recipe);

}  // namespace distrain
