// What a zero replica holds on its device, predicted from the recipe alone on a model that
// keeps no storage, byte for byte what the built strategy's memory_per_replica reports
// (tested): for `distrain plan`, which weighs models too big to build here. Mirrors the
// buffers of zero_gatherers.hpp and zero_reducers.hpp for strategy.stage.
#pragma once
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"
#include "core/strategy/zero_gatherers.hpp"

namespace distrain {

MemoryUse zero_memory_per_replica(const Recipe& recipe, int replicas);

// What GatherUpdates (zero stages 1 and 2, the mesh's shard_optimizer) holds of the
// trainable values `layers` (an arena of `arena` elements) shared by `replicas`: bytes on
// the device, and the float32 masters' in host memory (bf16 with offload).
struct GatheredValueBytes {
  int64_t device = 0, host = 0;
};
GatheredValueBytes gather_updates_bytes(const std::vector<Range>& layers, int64_t arena, int replicas,
                                        const ShardedValues& how);

}  // namespace distrain
