// One variable of an arena sharded by ShardLayout, as checkpoints read and write it: replica
// g moves only the pieces of the variable it owns, between its shard (of values or of an
// optimizer slot) and the variable's elements in host memory.
#pragma once
#include "core/backend/backend.hpp"
#include "core/strategy/shard_layout.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

// The pieces of v that g owns, from `shard` into out (v's elements; the rest untouched).
void download_owned(Backend& backend, const ShardLayout& layout, int g, const Tensor& shard, const Variable& v, float* out);
// The pieces of v that g owns, from in (v's elements) into `shard`.
void upload_owned(Backend& backend, const ShardLayout& layout, int g, const float* in, Tensor shard, const Variable& v);

}  // namespace distrain
