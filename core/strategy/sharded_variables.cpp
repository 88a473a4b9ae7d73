#include "core/strategy/sharded_variables.hpp"

namespace distrain {

void download_owned(Backend& backend, const ShardLayout& layout, int g, const Tensor& shard, const Variable& v, float* out) {
  for (const ShardLayout::Piece& p : layout.owned({v.offset, v.offset + v.shape.numel()}, g))
    backend.download(shard.range(p.shard_offset, p.arena.size()), out + (p.arena.begin - v.offset));
}

void upload_owned(Backend& backend, const ShardLayout& layout, int g, const float* in, Tensor shard, const Variable& v) {
  for (const ShardLayout::Piece& p : layout.owned({v.offset, v.offset + v.shape.numel()}, g))
    backend.upload(in + (p.arena.begin - v.offset), shard.range(p.shard_offset, p.arena.size()));
}

}  // namespace distrain
