// Sequence parallelism (Megatron's, Korthikanti et al. 2022): around the tensor-parallel
// layers, the layers that work per position (layer norm, the residual adds, element-wise
// layers) run on this rank's shard of the sequence, positions [r T/d, (r+1) T/d) of each
// example, so their activations shrink by the tensor degree d. A column-parallel or
// attention layer all-gathers its input's shards along the sequence; a row-parallel or
// attention layer reduce-scatters its partial outputs along the sequence instead of
// all-reducing them.
//
// Tensors here are (N, T, C) whole and (N, T/d, C) sharded, row-major.
#pragma once
#include <memory>

#include "core/layers/layer.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

// whole (N, T, C) from every rank's shard (N, T/d, C).
void gather_sequence(Ctx& ctx, Communicator& group, const Tensor& shard, Tensor whole);
// This rank's shard (N, T/d, C) of the sum over the group of each rank's whole (N, T, C).
void reduce_scatter_sequence(Ctx& ctx, Communicator& group, const Tensor& whole, Tensor shard);

// The tensor-axis traffic of a layer holding both halves of a column/row pair (attention,
// gated_mlp) on a (T, C) sequence of `whole` = T C elements per example: on sequence shards
// its input gathered and output reduce-scattered (backward: the output gradient and the
// input gathered, the input gradient reduce-scattered); split without them, the partial
// output and input gradient all-reduced; nothing when not split.
TensorTraffic paired_split_traffic(bool sequence, bool split, int64_t whole, bool input_gradient);

// A layer's view of a (N, T/d, C) shard as the whole (N, T, C): gathered into a buffer
// that lives as long as this object (so a layer keeps one layer's whole input only while
// it computes), or the tensor itself when `sharded` is false.
struct WholeSequence {
  WholeSequence(Ctx& ctx, const Layer& layer, const Tensor& t, bool sharded, int64_t whole_length);
  Buffer gathered;
  Tensor view;
};

// sequence_scatter: where a whole activation enters the sharded layers (after the
// embeddings): forward keeps this rank's positions; backward all-gathers the gradient.
std::unique_ptr<Layer> make_sequence_scatter(const TensorPlace& place);
// sequence_gather: where sharded activations meet a layer that needs the whole sequence
// (the output head): forward all-gathers; backward keeps this rank's positions of the
// gradient, the same on every rank.
std::unique_ptr<Layer> make_sequence_gather(const TensorPlace& place);

}  // namespace distrain
