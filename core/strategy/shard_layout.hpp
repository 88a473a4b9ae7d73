// ShardLayout: how ZeRO splits the trainable arena among n replicas. Replica g owns
// [g*S, g*S + S) clipped to the arena, with S = arena / n rounded up to whole 16-float
// blocks, so every shard starts aligned like the variables (ParamArena::kAlign).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/base/range.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

struct ShardLayout {
  ShardLayout() = default;
  ShardLayout(int64_t arena_size, int replicas) : arena(arena_size) {
    shard = (arena + replicas - 1) / replicas;
    shard = (shard + ParamArena::kAlign - 1) / ParamArena::kAlign * ParamArena::kAlign;
  }
  // The range replica g owns (empty for replicas past the end of a small arena).
  Range own(int g) const {
    const int64_t begin = std::min(static_cast<int64_t>(g) * shard, arena);
    return {begin, std::min(begin + shard, arena)};
  }

  int64_t arena = 0;  // trainable elements with padding
  int64_t shard = 0;  // S, the most any replica owns
};

}  // namespace distrain
