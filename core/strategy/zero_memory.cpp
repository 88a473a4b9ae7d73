#include "core/strategy/zero_memory.hpp"

#include "core/backend/backend.hpp"
#include "core/model/no_storage.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/shard_layout.hpp"
#include "core/strategy/zero_gatherers.hpp"

namespace distrain {

MemoryUse zero_memory_per_replica(const Recipe& recipe, int replicas) {
  Model m(recipe.model(), backend_for(Device{}), storage_free_seams());
  m.set_recompute(recipe.train.recompute_blocks);
  m.set_precision(recipe.train.matmul_dtype);
  const ShardLayout layout(m.trainable_ranges(), replicas);
  const int64_t arena = m.params().trainable_arena_size(), shard = layout.size(), bucket = layout.bucket_size();
  const int64_t stage = recipe.strategy.zero_stage;
  const auto element = static_cast<int64_t>(dtype_size(ParamArena::kDType));
  const auto half = static_cast<int64_t>(dtype_size(DType::bf16));
  const bool offload = recipe.strategy.offload_optimizer, bf16 = recipe.train.matmul_dtype == DType::bf16;
  // GatherUpdates (stages 1, 2): whole values, aligned per replica, and the shard;
  // ShardGatherer (3): the shard and one layer's bucket. Under bf16 (zero_gatherers.hpp)
  // the whole values or the bucket are also (or only) in bf16, with a chunk's staging, and
  // the shard (the masters) may be in host memory.
  const int64_t whole = arena + ParamArena::kAlign * replicas, chunk = bucket / std::max(1, replicas);
  const bool masters_on_host = bf16 && offload;
  const int64_t masters = masters_on_host ? 0 : shard * element;
  int64_t values = (stage < 3 ? whole + shard : shard + bucket) * element;
  if (bf16)
    values = masters + chunk * half +
             (stage < 3 ? whole * half + unpacked_size(m.trainable_ranges()) * element : bucket * (element + half));
  // ScatterAtFlush (1): whole gradients, the shard and a bucket; ShardingReducer (2, 3):
  // the shard, a bucket and one chunk of it reduced.
  const int64_t gradients = stage == 1 ? arena + shard + bucket : shard + bucket + bucket / std::max(1, replicas);
  const int64_t slots = static_cast<int64_t>(make_optimizer(recipe.optimizer)->slots().size()) * shard * element;
  return MemoryUse{values + m.params().state().numel() * element,
                   gradients * element + m.tied_gradient_bytes(), offload ? 0 : slots,
                   m.activation_bytes(recipe.strategy.per_replica_batch), (offload ? slots : 0) + (masters_on_host ? shard * element : 0)};
}

}  // namespace distrain
