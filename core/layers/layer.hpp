// Layer: one step of a model with explicit forward and backward (as Caffe and llm.c).
//
// Contract:
//   setup(in)        in is the per-example input shape (no batch dimension); declares the
//                    layer's variables in the arena and returns the per-example output shape.
//                    Throws UserError naming the layer when the input shape does not fit.
//   forward(in,out)  in (N, ...) -> out (N, ...), out written.
//   backward         din written (=), parameter gradients accumulated (+=) into the arena.
//                    dout is consumed and may be overwritten. din may be empty (the model's
//                    input needs no gradient); then the layer skips that work.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/comm/communicator.hpp"
#include "core/tensor/buffer.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

// Recipe limits that keep shape arithmetic inside int64: a kernel, pool or stride is at
// most kMaxWindow; a per-example extent, element count or variable at most kMaxExtent
// elements (Model and the layers refuse more with a UserError).
inline constexpr int64_t kMaxWindow = int64_t{1} << 16;
inline constexpr int64_t kMaxExtent = int64_t{1} << 40;
// The element type of activations and their gradients: memory estimates count in it.
inline constexpr DType kActivationDType = DType::f32;

struct Ctx {
  Backend& backend;
  bool training = true;
  uint64_t step_seed = 0;  // differs per step and replica: drives dropout masks
  // Set under sync_batch_norm: batch norm then uses statistics of the global batch.
  const CrossReplicaSum* cross_replica_sum = nullptr;
  // The ranks of the mesh's tensor axis, for layers split over it (set_tensor_place).
  Communicator* tensor = nullptr;
  // A pipeline stage's link to its neighbours: Model moves its sends on between layers.
  Communicator* messages = nullptr;
  // Set by Model around the forward of a layer that rounds_output(): how the op writing
  // that layer's output rounds it (not rounded outside train.precision = "bf16").
  OutputRounding output_rounding{};
};

// How a layer is split over the tensor axis of a mesh (Megatron's tensor parallelism):
//   column  it holds a slice of its outputs (dense units, conv2d filters): input whole,
//           output this rank's slice of the last axis; in backward the input gradient is
//           summed over the tensor group;
//   row     it holds a slice of its inputs (dense inputs, conv2d input channels): input
//           this rank's slice of the last axis, output whole (the partial outputs summed
//           over the group in forward, then the bias added once);
//   sliced  it sits between a column layer and the row layer (or gather) after it and
//           works per channel: input and output are this rank's slice of the last axis,
//           and any per-channel variable (batch norm's) is sliced the same way.
//   heads   a layer that holds both halves of such a pair (attention: its query, key and
//           value projection column-parallel by heads, its output projection row-parallel):
//           input and output whole, the partial outputs summed in forward and the input
//           gradient summed in backward.
// Vocabulary parallelism (TensorPlace::vocabulary) splits an embedding as a row layer (its
// table's rows: the one-hot input's slice; token ids whole, the output summed) and the
// output head as a column layer whose slice of the classes goes to the loss ungathered.
// A column layer followed by a row layer exchanges nothing between them.
enum class TensorSplit { none, column, row, sliced, heads };
struct TensorPlace {
  TensorSplit split = TensorSplit::none;
  int rank = 0, degree = 1;
  // Sequence parallelism (core/layers/sequence_shard.hpp): a layer that works per position
  // runs on this rank's shard of the sequence; a column or heads layer's input is such a
  // shard (all-gathered inside), a row or heads layer's output too (reduce-scattered).
  bool sequence = false;
  // A split by vocabulary (core/model/tensor_plan.hpp): slices of the vocabulary need not be
  // equal (tensor_slice.hpp rounds them), so that GPT-2's 50,257 tokens split.
  bool vocabulary = false;
};

// A layer's `tensor_parallel` key: "auto" (nullopt: as the mesh's plan says), "column",
// "row", "heads" or "replicated" (none).
std::optional<TensorSplit> parse_tensor_request(const std::string& value);

// What a layer makes for its passes (buffers forward keeps for backward, scratch, a
// backend's op): not part of its configuration, so a copy of the layer (copy_layer)
// starts without it.
template <class T>
class NotCopied : public T {
 public:
  NotCopied() = default;
  NotCopied(const NotCopied&) : T() {}
  NotCopied& operator=(const NotCopied&) = delete;
  using T::operator=;
};

// A collective a layer makes along the tensor axis in one pass: its kind and the elements
// of its whole buffer per example (an all-reduce's buffer, a reduce-scatter's input, an
// all-gather's output), for `distrain plan`'s traffic and time (core/plan/plan_cost.hpp).
struct TensorCollective {
  enum class Kind { all_reduce, reduce_scatter, all_gather } kind;
  int64_t elements;
};
struct TensorTraffic {
  std::vector<TensorCollective> forward, backward;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string type() const = 0;
  virtual Shape setup(const Shape& in, ParamArena& arena) = 0;
  virtual void forward(Ctx& ctx, const Tensor& in, Tensor out) = 0;
  virtual void backward(Ctx& ctx, const Tensor& in, const Tensor& out, Tensor dout, Tensor din) = 0;

  // Its configuration in its recipe table's keys, defaults filled in ({"filters": 32,
  // "kernel_size": [3, 3], ...}; empty for a layer with none): what the exporters
  // (core/io/export_*.hpp) translate into other frameworks' layers.
  virtual nlohmann::ordered_json settings() const;

  // The element type of its input: float32, or int32 token ids (embedding).
  virtual DType input_dtype() const { return DType::f32; }

  // How many inputs the layer takes (add: 2). The model calls only the *_inputs versions,
  // which a one-input layer leaves to the calls above; a layer of more inputs overrides them.
  virtual int arity() const { return 1; }
  virtual Shape setup_inputs(const std::vector<Shape>& in, ParamArena& arena) { return setup(in.at(0), arena); }
  virtual void forward_inputs(Ctx& ctx, const std::vector<Tensor>& in, Tensor out) { forward(ctx, in.at(0), out); }
  virtual void backward_inputs(Ctx& ctx, const std::vector<Tensor>& in, const Tensor& out, Tensor dout,
                               const std::vector<Tensor>& din) {
    backward(ctx, in.at(0), out, dout, din.at(0));
  }

  // A layer that computes with another layer's variable (an output head tied to the token
  // embedding) gives that variable's arena id after setup(). The model then hands it a
  // gradient tensor of the variable's shape (set_tied_grad), which its backward writes (=),
  // and adds that into the variable's gradient when the owner's backward runs: the
  // variable's gradient is the sum of both uses, whatever strategy holds it.
  virtual std::optional<int> tied_variable() const { return std::nullopt; }
  // The name of the layer whose variable it uses (known before setup), or "".
  virtual std::string tied_layer() const { return ""; }
  virtual void set_tied_grad(Tensor) {}

  // GPT-2 initialises the projections that write into the residual stream with a stddev
  // scaled by 1/sqrt(their number in the model): a layer says how many it has, and the
  // model tells each the total before setup().
  virtual int residual_projections() const { return 0; }
  virtual void set_residual_projections(int) {}

  // Whether its backward reads its inputs' values, and its output's (else it is given
  // their shapes only): a model keeping activations in bf16 copies only what is read.
  virtual bool backward_reads_inputs() const { return true; }
  virtual bool backward_reads_output() const { return true; }
  // Whether it reads its inputs only as operands of its products (matmul), forward and
  // backward: then under bf16 the model hands it the bf16 copies it keeps, which the
  // products read as they are, instead of float32 copies made for it.
  virtual bool reads_inputs_as_products() const { return false; }
  // Whether the op that writes its output last rounds it as ctx.output_rounding says: then
  // under bf16 the model gives it that rounding instead of rounding the output after (one
  // pass over the output less).
  virtual bool rounds_output() const { return false; }

  // The floating-point operations of its matrix products in one forward pass of one
  // example (two a multiply-add), as set up: `plan --device-tflops` prices a layer's compute
  // from them. 0 for element-wise layers and gathers, which the bytes they move price.
  virtual double forward_flops() const { return 0; }

  // Bytes a layer keeps per batch of n besides its output and its gradient (attention's
  // projections, layer norm's statistics), for `check` and the memory estimate.
  virtual int64_t workspace_bytes(int64_t) const { return 0; }
  // Bytes a layer allocates only while its forward or backward runs, at most (sequence
  // parallelism's gathered sequences): the model counts the largest layer's.
  virtual int64_t transient_bytes(int64_t) const { return 0; }
  // Under train.precision = "bf16" every read of this layer's parameters rounds them anyway:
  // a bf16 product's operand, or rows copied unchanged to an output that the model rounds
  // as it is made (`output_rounded`). Then the model need not round a copy for it.
  virtual bool reads_parameters_rounded(bool /*output_rounded*/) const { return false; }
  // Frees what forward keeps for backward (workspace_bytes): under recomputation the model
  // reruns the forward before the backward, which makes it again.
  virtual void release_workspace() {}

  // The collectives its forward and its backward make along the tensor axis, as set up;
  // `input_gradient`: whether its backward makes an input gradient (Model::
  // makes_input_gradient). Each layer that calls the tensor group says here what it calls;
  // the dist tests hold plan's sum of them against a run's count.
  virtual TensorTraffic tensor_traffic(bool /*input_gradient*/) const { return {}; }
  // The splits this layer supports; set_tensor_place() picks one before setup(). A layer
  // that works per channel can run sliced.
  virtual bool can_split(TensorSplit split) const {
    return split == TensorSplit::none || (split == TensorSplit::sliced && per_channel());
  }
  // The split the recipe asks for (a dense or conv2d layer's tensor_parallel key), if any.
  virtual std::optional<TensorSplit> requested_split() const { return std::nullopt; }
  // Works element by element (relu, dropout, rescaling): runs on a slice of the features
  // as on all of them.
  virtual bool elementwise() const { return false; }
  // Works on each channel (the last axis) on its own: runs on a slice of the channels as
  // on all of them (element-wise layers, pooling, batch norm with its per-channel
  // statistics). The tensor plan keeps such layers on a column layer's slice.
  virtual bool per_channel() const { return elementwise(); }
  // Works on each position of a sequence on its own (layer norm, add, element-wise
  // layers): runs on a shard of the positions as on all of them (sequence parallelism).
  virtual bool per_position() const { return elementwise(); }
  void set_tensor_place(const TensorPlace& place);
  const TensorPlace& tensor_place() const { return place_; }
  // The operands of this layer's matrix products (train.precision): f32, or bf16 rounded
  // with float32 accumulation.
  void set_matmul_dtype(DType operands) { matmul_dtype_ = operands; }
  // What it keeps for backward besides its output (workspace_bytes): f32, or bf16 under
  // train.precision = "bf16" where the model keeps layer outputs in bf16 (not inside a
  // block it recomputes: there one block's workspace lives at a time, and the float32
  // copies a bf16 one needs while backward runs would outweigh what it saves).
  void set_workspace_dtype(DType kept) { workspace_dtype_ = kept; }

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  int index() const { return index_; }
  void set_index(int i) { index_ = i; }

 protected:
  // Throws UserError "layer 'conv2d_1': <message>".
  [[noreturn]] void fail(const std::string& message) const;
  // The tensor axis's communicator, which a split layer needs in every pass.
  Communicator& tensor_group(Ctx& ctx) const;
  // The operands of this layer's matrix products: f32, or bf16 (train.precision).
  DType matmul_dtype() const { return matmul_dtype_; }
  // What it keeps for backward besides its output, as set_workspace_dtype says.
  DType workspace_dtype() const { return workspace_dtype_; }
  // c = op(a) * op(b) + beta * c in this layer's matmul precision.
  void matmul(Ctx& ctx, bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b, float beta,
              Tensor c) const;
  // The device bytes the products of a linear map from `in` to `out` features over `rows`
  // take while one runs (forward, weight gradient, input gradient): bf16's operand copies.
  int64_t linear_scratch_bytes(int64_t rows, int64_t in, int64_t out) const;
  // An operand of backward's products (an output gradient): where `both_products` read it
  // (the weight and the input gradients) under bf16, rounded once into `copy` (made here)
  // and read by both as bf16, where its rows are whole 16-byte multiples (a device reads
  // such a copy where it lies); else x itself, rounded by each product that reads it.
  Tensor shared_operand(Ctx& ctx, const Tensor& x, Buffer& copy, bool both_products) const;
  // The bytes of shared_operand's copy of a (rows, width) operand.
  int64_t shared_operand_bytes(int64_t rows, int64_t width) const;

 private:
  std::string name_;
  int index_ = 0;
  TensorPlace place_;
  DType matmul_dtype_ = DType::f32;
  DType workspace_dtype_ = DType::f32;
};

}  // namespace distrain
