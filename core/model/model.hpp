// Model: the layers of a model spec (core/model/model_spec.hpp: the recipe's [model], read
// once), copied from its prototypes and set up, with all variables in one ParamArena. The
// layers form the spec's graph in recipe order: each takes the previous layer's output
// unless its `inputs` name others (a residual `add`), repeat blocks expanded into their
// copies (docs/recipe.md, "The model graph"). The last layer's output is the model's.
//
// Activations for a batch of N are kept per layer (backward needs each layer's inputs
// and output), in bf16 under that precision with float32 copies in a few buffers while
// they are read (activation_slots.hpp); their gradients share a few buffers in turn
// (gradient_slots.hpp). All are reallocated only when N changes. Where an output feeds
// several layers, its gradient is the sum of theirs: the first consumer in backward order
// writes it, the others add theirs (through a scratch buffer, since layers write input
// gradients).
//
// Where trainable values and gradients live, and what happens to them around each layer,
// is decided by the two objects a model is given (ModelSeams): a ParamGatherer and a
// GradientReducer. By default it keeps them all (FullValues, FullGradients).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model/model_spec.hpp"
#include "core/layers/layer.hpp"
#include "core/model/activation_slots.hpp"
#include "core/model/gradient_reducer.hpp"
#include "core/model/gradient_slots.hpp"
#include "core/model/layer_clock.hpp"
#include "core/model/param_gatherer.hpp"
#include "core/model/tensor_plan.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

// This rank's place on a mesh's tensor axis (size 1: no tensor parallelism).
struct TensorGroup {
  int rank = 0, size = 1;
  bool sequence = false;  // sequence parallelism (strategy.sequence_parallel)
  VocabularySplit vocabulary = VocabularySplit::off;  // strategy.vocab_parallel
};

// The part of the layer list a model runs (one pipeline stage): layers [first, end) of
// the list after tensor-parallel placement (tensor_gather layers included). A stage after
// the first also computes the gradient of its input, which goes to the stage before it.
struct ModelPart {
  size_t first = 0, end = SIZE_MAX;
  bool input_grad = false;
};

// What a strategy gives a model; a null member gets the default (FullValues, FullGradients).
struct ModelSeams {
  std::unique_ptr<ParamGatherer> gatherer;
  std::unique_ptr<GradientReducer> reducer;
};

class Model {
 public:
  // Throws UserError where the spec cannot be placed as asked (tensor, part).
  // Under tensor parallelism (`tensor`: this rank of the mesh's tensor axis and its size)
  // layers split as core/model/tensor_plan.hpp says; the forward and backward passes then
  // need Ctx::tensor.
  // A `part` runs only those layers and holds only their variables; the other layers are
  // built for their shapes (and names) only.
  Model(const ModelSpec& spec, Backend& backend, ModelSeams seams = {}, TensorGroup tensor = {}, ModelPart part = {});
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // x (N, input_shape...) -> the last layer's output (N, output_shape...), a view owned here.
  Tensor forward(Ctx& ctx, const Tensor& x);
  // Where the loss writes the gradient of the output before backward().
  Tensor output_grad() const { return grad_of(layers_.size() - 1); }
  // Under vocabulary parallelism the output (the last stage's) is this rank's slice of the
  // classes: the first class of it. nullopt: the output is whole.
  std::optional<int64_t> output_first_class() const { return output_first_class_; }
  // Propagates output_grad() back; parameter gradients accumulate into the arena.
  void backward(Ctx& ctx);
  // With part.input_grad: the gradient of the last forward's input, after backward().
  Tensor input_grad() const { return input_grad_.view(); }
  // The gatherer's and reducer's calls of forward() and backward() without computing: a
  // replica with no examples still takes part in the collectives they make.
  void forward_without_examples();
  void backward_without_examples();
  // The arena range holding layer i's trainable variables (empty: none).
  Range trainable_range(size_t layer) const { return ranges_.at(layer); }
  const std::vector<Range>& trainable_ranges() const { return ranges_; }
  void zero_grads() { reducer_->zero(); }
  // Under sequence parallelism, the whole variables of layers on sequence shards (layer
  // norm's) hold each rank's positions' share of their gradients: sums them over the
  // tensor axis. Once per step, before the gradients are reduced over the data axis.
  void sum_sequence_shard_gradients(Communicator& tensor);
  ParamGatherer& gatherer() { return *gatherer_; }
  GradientReducer& reducer() { return *reducer_; }
  // Times each layer's forward and backward calls from now on (`bench --profile`), or stops
  // with nullptr. Not owned: it must outlive the passes it times. CPU backends only (see
  // layer_clock.hpp).
  void set_layer_clock(LayerClock* clock) { clock_ = clock; }
  // train.recompute = "blocks": forward keeps only what leaves each repeat block (its last
  // layer's output, and any output read outside the block); backward reruns a block's
  // forward just before its layers' backward, with the same step seed (the same dropout
  // masks). Throws UserError for a block layer that changes state in forward (batch norm).
  void set_recompute(bool on);
  // What backward does with layer i, for `distrain plan`'s traffic (core/plan/plan_cost.hpp):
  // whether it makes an input gradient (not where it reads the model's input, nor below
  // the first layer with weights unless the input's gradient is wanted), and whether
  // recomputation reruns its forward first.
  bool makes_input_gradient(size_t i) const;
  bool reruns_forward(size_t i) const { return made_per_block(i); }
  // train.precision: float32, or bf16: layers read their parameters rounded to bf16 (the
  // gatherer's float32 values are the masters the update changes), the layers' matrix
  // products (dense, attention) take bf16-rounded operands, and every layer's output but
  // the logits (which the loss reads) is rounded to bf16; all but this model's last output
  // are kept at 2 bytes an element (activation_slots.hpp).
  void set_precision(DType precision);
  // Bytes of the buffer in which a layer reads its parameters rounded under bf16, where the
  // gatherer binds the float32 values themselves (Binding::values; 0 otherwise, and for
  // copies sharing one): the largest of the layers whose reads do not round them anyway.
  int64_t parameter_copy_bytes() const;
  // Copies of one replica's model run one at a time: they round into `first`'s buffer.
  void share_parameter_copy(Model& first) { parameter_copy_owner_ = &first; }

  ParamArena& params() { return arena_; }
  const ParamArena& params() const { return arena_; }
  const Shape& input_shape() const { return input_shape_; }
  // Each layer's output shape per example.
  const std::vector<Shape>& layer_shapes() const { return shapes_; }
  const Shape& output_shape() const { return shapes_.back(); }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Where layer i takes its inputs from: earlier layers' indices, -1 for the model's input.
  const std::vector<int>& layer_inputs(size_t i) const { return inputs_.at(i); }
  // float32 values, or int32 token ids (a model that starts with an embedding).
  DType input_dtype() const { return input_dtype_; }
  Backend& backend() const { return backend_; }
  // Bytes of the activations kept for a batch of n (float32), of the buffers their
  // gradients take in turn, and of what layers keep besides (Layer::workspace_bytes).
  // Saturates at INT64_MAX: a batch whose activations cannot be counted cannot be held.
  int64_t activation_bytes(int64_t n) const;
  // Of those, the largest layer's transient buffers (Layer::transient_bytes): made and
  // freed within one layer's pass, so pipeline copies of a model share them.
  int64_t transient_bytes(int64_t n) const;
  // Bytes of the gradients tied layers write for their owners' variables (a tied head's
  // (vocabulary, width) table gradient), beside the arena's.
  int64_t tied_gradient_bytes() const;
  // A table: layer, type, output shape, parameters.
  std::string summary() const;
  // Whether a pipeline stage may start at layer `first`: no layer from there on reads an
  // earlier output than the one just before it (which the stage receives as its input).
  bool can_cut_before(size_t first) const;

 private:
  bool is_chain() const;
  // The embedding table a layer uses besides its own variables (a tied head); allocates
  // the gradient it writes.
  void tie_layers();
  // Layer i's input tensors (their shapes only where not `read`), and where its backward
  // writes their gradients.
  std::vector<Tensor> layer_input_values(size_t i, bool read);
  std::vector<Tensor> layer_input_grads(size_t i, size_t last, std::vector<bool>& written, std::vector<Tensor>& add_into);
  void gather(size_t i);
  void release(size_t i);
  // Under bf16: the gathered parameters of arena range r rounded, see set_precision().
  void round_parameters(Range r);
  // The arena range layer i reads; whether the model rounds a copy of it for the layer
  // under bf16, and whether it rounds the layer's output as it is made.
  Range read_range(size_t i) const;
  bool rounds_parameters(size_t i) const;
  bool output_rounded(size_t i) const;
  int64_t largest_rounded_range() const;
  // origin: each layer's index in the spec (a tensor_gather's: the layer it gathers for).
  void place_on_tensor_axis(const TensorGroup& tensor, const ModelSpec& spec, std::vector<size_t>& origin);
  void setup_layers(const ModelSpec& spec, const std::vector<size_t>& origin);
  // Keeps only the part's layers (their variables were declared; the others' were not).
  void keep_part(const ModelPart& part, const std::string& file);
  void ensure_activations(int64_t n);
  // Layer i's output gradient for the current batch: a view of its slot.
  Tensor grad_of(size_t i) const;
  void make_tied_gradients();
  int64_t scratch_elements() const;
  // Recomputation: the outputs of block b's layers that are not kept, allocated, and
  // freed with what the layers keep for backward.
  void allocate_inner(int b, int64_t n);
  void release_inner(int b);
  // Reruns block b's forward up to its last layer (whose output was kept).
  void recompute_block(Ctx& ctx, int b);
  void run_forward(Ctx& ctx, size_t i, bool timed);
  // ranges_ and first_trainable_, from the variables' layers and offsets.
  void find_trainable_ranges();
  // Backward stops at this layer: below the first with trainable variables no gradient is
  // needed, unless the input's is wanted.
  size_t backward_end() const { return input_grad_wanted_ ? 0 : first_trainable_; }
  void plan_gradients();
  // Whether layer i's output (and what it keeps besides) lives only while its block runs,
  // made again for backward (recomputation's inner layers), rather than kept from forward.
  bool made_per_block(size_t i) const { return recompute_ && inner_[i]; }
  // Whether layer i's output is kept in bf16 (train.precision): all but the last layer's,
  // and under recomputation those kept from forward.
  bool kept_in_bf16(size_t i) const;
  // Whether layer i reads its input j as the bf16 copy kept of it (reads_inputs_as_products).
  bool reads_kept_bf16(size_t i, int j) const;
  // What train.precision and recomputation make of the layers: their products' and
  // workspaces' dtypes, and the steps of forward() and backward() that read or write
  // outputs kept in bf16.
  void plan_precision();
  // Starts a pass whose float32 copies of bf16 outputs live in `slots` (per layer).
  void begin_pass(const std::vector<int>& slots);
  // Layer j's output as layers read it (j < 0: the model's input); a bf16 one's float32
  // copy, made at its first read in the pass.
  Tensor value_of(int j);
  // Its shape alone, for a layer that does not read it (Layer::backward_reads_output).
  Tensor shape_of(int j) const;
  // Where layer i's forward writes its output.
  Tensor output_for_write(size_t i);

  Backend& backend_;
  Shape input_shape_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::vector<int>> inputs_;  // per layer, see layer_inputs()
  DType input_dtype_ = DType::f32;
  std::vector<Shape> shapes_;  // per-example output shape of each layer
  static constexpr size_t kElsewhere = SIZE_MAX;
  struct Tie {
    size_t owner;  // the layer whose variable it is; kElsewhere: on another pipeline stage,
                   // this model keeping a copy (its gradient added at the tied layer)
    int variable;
    Buffer grad;   // the tied layer's gradient for it, added at the owner's backward (made with the first batch)
  };
  std::vector<std::optional<Tie>> ties_;  // per layer
  std::vector<Buffer> scratch_;  // (N, largest output): a second consumer's gradient before it is added
  size_t first_trainable_ = 0;  // layers up to this one need no input gradient
  std::vector<Range> ranges_;  // per layer, see trainable_range()
  ParamArena arena_;
  std::unique_ptr<ParamGatherer> gatherer_;
  std::unique_ptr<GradientReducer> reducer_;
  int64_t batch_ = -1;
  std::string activation_purpose_;  // names the batch's buffers in device memory errors
  Tensor input_;
  std::vector<Buffer> acts_;  // (N, shapes_[i]...), bf16 where kept_in_bf16
  DType precision_ = DType::f32;
  Buffer parameter_copy_;  // (largest layer's range) its parameters rounded to bf16
  Model* parameter_copy_owner_ = this;  // whose parameter_copy_ this model rounds into
  Tensor unrounded_;  // the whole values, bound again at release
  ActivationSlots copy_plan_;
  std::vector<Buffer> copy_slots_;  // (N x copy_plan_.elements[s])
  const std::vector<int>* pass_slots_ = nullptr;  // the running pass's copy_plan_ slots
  std::vector<bool> copied_;  // per layer: its float32 copy is made in this pass
  GradientSlots grad_plan_;
  std::vector<Buffer> grad_slots_;  // (N x grad_plan_.elements[s])
  ModelPart part_;
  std::vector<int> block_;  // per layer: its repeat copy (ModelSpec::LayerSpec::block), -1 none
  bool recompute_ = false;
  std::vector<bool> inner_;  // recomputation: an output not kept from forward
  struct BlockSpan {
    size_t first = SIZE_MAX, last = 0;
  };
  std::vector<BlockSpan> blocks_;  // per block id: its first and last layer here
  bool input_grad_wanted_ = false;
  Buffer input_grad_;  // (N, input_shape...) with part.input_grad
  LayerClock* clock_ = nullptr;  // see set_layer_clock()
  std::optional<int64_t> output_first_class_;  // see output_first_class()
  bool output_is_logits_ = true;  // false on a pipeline stage before the head: bf16 rounds its output too
};

}  // namespace distrain
