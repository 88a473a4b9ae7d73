// StrategySpec: the [strategy] table of a recipe, parsed. The keys every strategy reads sit
// at the top; each strategy's own keys sit in its own struct, filled by its StrategyKind
// (strategy_kind.hpp) and left at their defaults under every other strategy.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace distrain {

class StrategyKind;

// mirrored: how the replicas of one process sum their gradients.
struct MirroredSpec {
  std::string cross_device_ops = "auto";  // auto | nccl | hierarchical_copy | reduce_to_one_device
};

// multi_worker_mirrored: how the workers sum theirs.
struct MultiWorkerSpec {
  std::string communication = "auto";  // auto | ring | nccl
};

struct ZeroSpec {
  int64_t stage = 1;               // 1, 2, 3
  bool offload_optimizer = false;  // optimizer state (and bf16's masters) in host memory, updated there
};

struct ParameterServerSpec {
  int64_t num_ps = 1;      // server ranks (0 .. num_ps-1)
  int64_t staleness = -1;  // -1 unbounded, 0 synchronous, s
};

struct MeshSpec {
  int64_t data = 1, tensor = 1, pipeline = 1;  // degrees, product = ranks launched
  bool shard_optimizer = false;                // optimizer state sharded over the data axis (ZeRO-1)
  bool sequence_parallel = false;              // per-position layers on sequence shards (tensor > 1)
  std::optional<bool> vocab_parallel;          // embeddings and head split by vocabulary; unset: where possible
  bool offload_optimizer = false;              // optimizer state in host memory, updated there
  int64_t micro_batches = 1;                   // micro-batches per per-replica batch (pipeline)
  std::string schedule = "1f1b";               // gpipe | 1f1b
  std::vector<std::string> stage_boundaries;   // first layer of each pipeline stage after the first
  int64_t ranks() const { return data * tensor * pipeline; }
};

struct StrategySpec {
  std::string name = "one_device";  // a registered StrategyKind's name
  std::vector<std::string> devices{"cpu:0"};  // this process's replicas, one per device
  int64_t per_replica_batch = 64;
  int threads = 0;  // CPU threads; 0 = OMP_NUM_THREADS or all cores
  int64_t check_every = 100;     // replica consistency check period (steps; 0 = never)
  bool sync_batch_norm = false;  // batch norm with statistics of the global batch
  int64_t device_memory = 0;     // bytes each device of this process may hold in buffers (0: no budget)
  double timeout_seconds = 300;  // MPI collectives and messages: a rank missing this long fails the job (0 = wait forever)
  static constexpr double kMaxTimeoutSeconds = 365.0 * 24 * 3600;

  MirroredSpec mirrored;
  MultiWorkerSpec multi_worker;
  ZeroSpec zero;
  ParameterServerSpec parameter_server;
  MeshSpec mesh;

  const StrategyKind& kind() const;  // the registered kind of `name`
  // The optimizer state lives in host memory (zero's or the mesh's offload_optimizer).
  bool offload_optimizer() const { return zero.offload_optimizer || mesh.offload_optimizer; }
};

}  // namespace distrain
