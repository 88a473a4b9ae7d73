// ShardLayout: how ZeRO splits the trainable arena among n replicas, layer by layer as FSDP
// does. Layer l's range is cut into n chunks of C_l elements (its size / n rounded up to
// whole 16-float blocks; the last chunks are clipped or empty) and replica g owns chunk g of
// every layer. So a layer's gradients are one reduce_scatter and its values one all_gather,
// every replica taking an equal part. Replica g keeps its chunks one after another in a
// shard of size() elements, zero padded, which is what its optimizer updates.
#pragma once
#include <cstdint>
#include <vector>

#include "core/base/range.hpp"

namespace distrain {

class ShardLayout {
 public:
  ShardLayout() = default;
  ShardLayout(const std::vector<Range>& layers, int replicas);

  int replicas() const { return replicas_; }
  int64_t size() const { return size_; }  // elements of every replica's shard
  // Layer l's chunk: C_l, and where the chunk starts in a shard.
  int64_t chunk(size_t l) const { return chunks_.at(l); }
  int64_t offset(size_t l) const { return offsets_.at(l); }
  // Elements of a bucket that holds any one layer's n chunks.
  int64_t bucket_size() const;
  // The arena range of layer l that replica g owns (clipped to the layer; may be empty).
  Range own(size_t l, int g) const;

  // A part of the arena that replica g owns, and where it lies in g's shard.
  struct Piece {
    Range arena;
    int64_t shard_offset = 0;
  };
  // The parts of arena range r (inside one layer or spanning several) that g owns.
  std::vector<Piece> owned(const Range& r, int g) const;
  // Where the parts of arena ranges `ranges` (in arena order) that g owns lie in g's shard,
  // in shard order, neighbours merged: which of a shard's elements weight decay applies to.
  std::vector<Range> in_shard(const std::vector<Range>& ranges, int g) const;

 private:
  std::vector<Range> layers_;
  std::vector<int64_t> chunks_, offsets_;
  int replicas_ = 1;
  int64_t size_ = 0;
};

}  // namespace distrain
