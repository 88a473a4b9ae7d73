#include "core/strategy/shard_layout.hpp"

#include <algorithm>

#include "core/base/error.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

ShardLayout::ShardLayout(const std::vector<Range>& layers, int replicas) : layers_(layers), replicas_(replicas) {
  DT_CHECK(replicas >= 1, "a shard layout over {} replicas", replicas);
  constexpr int64_t kBlock = ParamArena::kAlign;  // chunks start aligned, as variables do
  for (const Range& r : layers) {
    const int64_t chunk = (r.size() + replicas - 1) / replicas;
    chunks_.push_back((chunk + kBlock - 1) / kBlock * kBlock);
    offsets_.push_back(size_);
    size_ += chunks_.back();
  }
}

int64_t ShardLayout::bucket_size() const {
  int64_t largest = 0;
  for (const int64_t c : chunks_) largest = std::max(largest, c);
  return largest * replicas_;
}

Range ShardLayout::own(size_t l, int g) const {
  const Range& layer = layers_.at(l);
  const int64_t begin = layer.begin + g * chunks_.at(l);
  return intersect({begin, begin + chunks_.at(l)}, layer);
}

std::vector<ShardLayout::Piece> ShardLayout::owned(const Range& r, int g) const {
  std::vector<Piece> pieces;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Range mine = own(l, g);
    const Range part = intersect(r, mine);
    if (!part.empty()) pieces.push_back({part, offsets_[l] + (part.begin - mine.begin)});
  }
  return pieces;
}

std::vector<Range> ShardLayout::in_shard(const std::vector<Range>& ranges, int g) const {
  std::vector<Range> out;
  for (const Range& r : ranges)
    for (const Piece& p : owned(r, g)) out.push_back({p.shard_offset, p.shard_offset + p.arena.size()});
  return merged(std::move(out));
}

}  // namespace distrain
