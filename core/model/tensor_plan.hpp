// The tensor-parallel plan of a model (Megatron's): which layers split over the tensor
// axis of a mesh, and where a split output must be gathered.
//   - Dense and conv2d layers pair up: the first column-parallel (its units or filters
//     split), the next row-parallel (its inputs or input channels split), with only layers
//     that work per channel between them (relu, dropout, rescaling, pooling, batch_norm,
//     global_avg_pool2d), which run sliced on the column layer's slice of the channels.
//     The pair exchanges nothing inside; the row layer's output is whole again.
//   - A layer with nothing to pair with is column-parallel and its slice gathered by a
//     tensor_gather layer after the last pooling or batch-norm layer that follows it
//     (less to gather, per-channel statistics on the slice), before any element-wise
//     layers after those, which run whole (a dropout there draws one_device's masks).
//   - A layer's `tensor_parallel` = "column" | "row" | "replicated" overrides; "row" needs
//     a column-parallel layer before it.
//   - An attention layer splits by heads (TensorSplit::heads): both halves of a pair in one
//     layer, input and output whole.
//   - In a graph (a GPT's residual adds), a slice runs only along a plain chain: from the
//     column layer on, each layer takes just the previous one's output, which nothing else
//     reads. Where the chain ends before a row layer, the slice is gathered.
//   - Vocabulary parallelism (Megatron's; strategy.vocab_parallel): every embedding splits
//     its table by rows (a row layer, its partial outputs summed), and the model's last
//     layer, a dense head (tied to an embedding's table or not), by its units (a column
//     layer) without a gather: its slice of the classes is the model's output, which the
//     loss takes as it is (Loss::set_class_slice). Slices may differ by one row, so a
//     vocabulary of 50,257 splits. A head tied to an embedding splits only this way.
//   - Every other layer (flatten, layer norm, the position embedding, adds, and the
//     per-channel ones outside a slice) runs whole on every rank of the tensor axis
//     (replicated).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/layers/layer.hpp"

namespace distrain {

//   - With sequence parallelism (core/layers/sequence_shard.hpp), a layer that works per
//     position runs on a sequence shard where a column or attention layer reads its output
//     (directly or through such layers) or it reads a shard; a whole output read as a shard
//     is cut by a sequence_scatter after it (the embeddings' sum), a shard read whole is
//     gathered by a sequence_gather (before the head), and the model's output is whole.
struct TensorPlanEntry {
  TensorSplit split = TensorSplit::none;
  bool gather_after = false;           // the output is a slice the next layer needs whole
  bool sequence = false;               // TensorPlace::sequence
  bool scatter_sequence_after = false;  // a whole output some reader takes as a shard
  bool gather_sequence_after = false;   // a sharded output some reader (or the model) needs whole
};
struct TensorPlan {
  std::vector<TensorPlanEntry> layers;  // one per layer
  bool scatter_input = false;           // the model's input is read as a shard
  bool vocabulary = false;              // split by vocabulary: the output is a slice of the classes
};

// strategy.vocab_parallel: off; on where the model allows it (a model with embeddings and a
// dense head, trained with sparse cross-entropy from logits); or required (an error where not).
enum class VocabularySplit { off, where_possible, required };

// Why the vocabulary of these layers (inputs as for plan_tensor_parallel) cannot split over
// `degree` ranks, or "".
std::string vocabulary_obstacle(const std::vector<std::unique_ptr<Layer>>& layers, const std::vector<std::vector<int>>& inputs,
                                int degree);

// All none when degree is 1. inputs[i]: where layer i takes its inputs (earlier layers'
// indices, -1 the model's input). Throws UserError naming the layer and `file` for a
// request that cannot be met.
TensorPlan plan_tensor_parallel(const std::vector<std::unique_ptr<Layer>>& layers, const std::vector<std::vector<int>>& inputs,
                                int degree, bool sequence, VocabularySplit vocabulary, const std::string& file);
// Whether a layer with this place reads its inputs as sequence shards.
bool reads_sequence_shard(const TensorPlace& place);

}  // namespace distrain
