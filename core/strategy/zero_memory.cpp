#include "core/strategy/zero_memory.hpp"

#include "core/backend/backend.hpp"
#include "core/model/no_storage.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/shard_layout.hpp"
#include "core/strategy/zero_gatherers.hpp"

namespace distrain {

GatheredValueBytes gather_updates_bytes(const std::vector<Range>& layers, int64_t arena, int replicas,
                                        const ShardedValues& how) {
  const ShardLayout layout(layers, replicas);
  const auto element = static_cast<int64_t>(dtype_size(ParamArena::kDType));
  const auto half = static_cast<int64_t>(dtype_size(DType::bf16));
  // Whole values, aligned per replica, and the shard; under bf16 the whole values in bf16,
  // a chunk's staging, the running layer unpacked, and the shard as float32 masters.
  const int64_t whole = arena + ParamArena::kAlign * replicas, shard = layout.size() * element;
  if (!how.bf16) return {whole * element + shard, 0};
  const int64_t staging = layout.bucket_size() / std::max(1, replicas) * half;
  const int64_t copies = staging + whole * half + unpacked_size(layers) * element;
  return how.master_on_host ? GatheredValueBytes{copies, shard} : GatheredValueBytes{copies + shard, 0};
}

MemoryUse zero_memory_per_replica(const Recipe& recipe, int replicas) {
  Model m(recipe.model(), backend_for(Device{}), storage_free_seams());
  m.set_recompute(recipe.train.recompute_blocks);
  m.set_precision(recipe.train.matmul_dtype);
  const ShardLayout layout(m.trainable_ranges(), replicas);
  const int64_t arena = m.params().trainable_arena_size(), shard = layout.size(), bucket = layout.bucket_size();
  const int64_t stage = recipe.strategy.zero.stage;
  const auto element = static_cast<int64_t>(dtype_size(ParamArena::kDType));
  const auto half = static_cast<int64_t>(dtype_size(DType::bf16));
  const bool offload = recipe.strategy.zero.offload_optimizer, bf16 = recipe.train.matmul_dtype == DType::bf16;
  const ShardedValues how{bf16, bf16 && offload};
  // GatherUpdates (stages 1, 2), or ShardGatherer (3): the shard and one layer's bucket; under
  // bf16 (zero_gatherers.hpp) the bucket also in bf16, with a chunk's staging, and the
  // shard (the masters) perhaps in host memory.
  GatheredValueBytes values = gather_updates_bytes(m.trainable_ranges(), arena, replicas, how);
  if (stage == 3) {
    const int64_t masters = shard * element, copies = bucket / std::max(1, replicas) * half + bucket * (element + half);
    values = !bf16 ? GatheredValueBytes{(shard + bucket) * element, 0}
                   : how.master_on_host ? GatheredValueBytes{copies, masters} : GatheredValueBytes{copies + masters, 0};
  }
  // ScatterAtFlush (1): whole gradients, the shard and a bucket; ShardingReducer (2, 3):
  // the shard, a bucket and one chunk of it reduced.
  const int64_t gradients = stage == 1 ? arena + shard + bucket : shard + bucket + bucket / std::max(1, replicas);
  const int64_t slots = static_cast<int64_t>(make_optimizer(recipe.optimizer)->slots().size()) * shard * element;
  return MemoryUse{values.device + m.params().state().numel() * element, gradients * element + m.tied_gradient_bytes(),
                   offload ? 0 : slots, m.activation_bytes(recipe.strategy.per_replica_batch),
                   (offload ? slots : 0) + values.host};
}

}  // namespace distrain
