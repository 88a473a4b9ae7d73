// mesh: one process per device (mpirun -np N), the ranks on a device mesh with axes data,
// tensor and pipeline (core/comm/mesh.hpp), N = data x tensor x pipeline.
//   data    replicas: each data rank takes its slice of the global batch; gradients are
//           summed over the data axis (or, with shard_optimizer, reduce-scattered and the
//           optimizer state sharded: ZeRO-1);
//   tensor  the model's layers split over the tensor ranks as core/model/tensor_plan.hpp
//           says (Megatron's column/row pairs); the ranks of one tensor group see the same
//           examples, and each holds and updates only its slices of the split variables;
//   pipeline  the layers cut into stages (core/model/stage_partition.hpp), each rank running
//           its stage's micro-batches in the schedule's order (core/strategy/replica.hpp).
// Checkpoints hold whole variables: saving reads each from its stage and gathers it over
// the tensor axis, loading slices it, so a checkpoint moves between this and any other
// strategy.
// Every rank computes on strategy.devices' one device, or on its own of a host's GPUs
// (ranks may share a GPU). On GPUs each axis's collectives run on NCCL where no two ranks
// share a GPU, else through host memory (Mesh::staged over MPI), as the pipeline's messages do.
// The ranks are the job's MPI processes, or threads of one process given their Mesh
// (Mesh::over_threads), which lets unit tests run every layout in-process.
#pragma once
#include "core/comm/mesh.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

// Whether shard_optimizer keeps float32 masters of each data rank's shard beside bf16 whole
// values (under bf16, as zero stage 1) rather than whole float32 values. A pipeline's
// micro-batches in flight read each layer unpacked from those bf16 values too.
bool sharded_masters(const Recipe& recipe);

// The device this process's rank computes on: strategy.devices' one, or of a host's GPUs
// entry r mod their number for the launcher's rank r on this host (0 without a launcher,
// as for every rank of a thread mesh); UserError when the launcher does not say r.
Device mesh_rank_device(const Recipe& recipe);
// Where the ranks compute, for plans: "cuda:0", or "its host's of cuda:0, cuda:1".
std::string mesh_devices(const StrategySpec& s);
// This process's rank of a mesh of the job's MPI processes.
std::unique_ptr<Strategy> make_mesh_strategy(const Recipe& recipe);
// Rank mesh.rank() of the given mesh, whose shape must be the recipe's.
std::unique_ptr<Strategy> make_mesh_strategy(const Recipe& recipe, const Mesh& mesh);

}  // namespace distrain
