// dense: Keras Dense on the last axis of its input (features,) or (sequence, features):
// kernel (in, units), bias (units), optional ReLU; column- or row-parallel over a mesh's
// tensor axis (layer.hpp, TensorSplit). With tied_to it has no kernel of its own but
// uses an embedding layer's table (vocabulary, in) transposed: GPT-2's output head, which
// splits with the table by vocabulary (a column layer, its slice of the classes going to
// the loss; core/model/tensor_plan.hpp).
// With sequence parallelism a column layer's input and a row layer's output are sequence
// shards (core/layers/sequence_shard.hpp).
#include <cmath>

#include "core/base/json.hpp"
#include "core/layers/registry.hpp"
#include "core/layers/sequence_shard.hpp"

namespace distrain {

class Dense final : public Layer {
 public:
  explicit Dense(ConfigTable& c)
      : units_(c.get_int("units")),
        use_bias_(c.get_bool("use_bias", true)),
        relu_(c.get_choice("activation", "none", {"none", "linear", "relu"}) == "relu"),
        kernel_init_name_(c.get_choice("kernel_initializer", "glorot_uniform", {"glorot_uniform", "he_normal", "normal", "gpt2_residual"})),
        tied_to_(c.get_string("tied_to", "")),
        requested_(parse_tensor_request(c.get_choice("tensor_parallel", "auto", {"auto", "column", "row", "replicated"}))) {
    if (units_ <= 0) c.fail("units", "must be positive");
    if (c.has("tied_to") && tied_to_.empty())
      c.fail("tied_to", "is empty: name the embedding layer whose table this head shares, or leave the key out");
    if (!tied_to_.empty() && use_bias_) c.fail("tied_to", "a head tied to an embedding has no bias: add use_bias = false");
    if (!tied_to_.empty() && c.has("kernel_initializer")) c.fail("kernel_initializer", "a tied head has no kernel of its own");
    if (!tied_to_.empty() && relu_) c.fail("activation", "a head tied to an embedding gives logits: leave activation out");
    if (!tied_to_.empty() && requested_ && *requested_ != TensorSplit::none)
      c.fail("tensor_parallel", "a head tied to an embedding splits with its table, by vocabulary (strategy.vocab_parallel)");
  }

  std::string type() const override { return "dense"; }
  Json settings() const override {
    return {{"units", units_}, {"use_bias", use_bias_}, {"activation", relu_ ? "relu" : "linear"}, {"tied_to", tied_to_}};
  }
  bool can_split(TensorSplit split) const override {  // mixes all features
    return split == TensorSplit::none || split == TensorSplit::column || (split == TensorSplit::row && tied_to_.empty());
  }
  int residual_projections() const override { return kernel_init_name_ == "gpt2_residual" ? 1 : 0; }
  void set_residual_projections(int total) override { residual_stddev_ = 0.02 / std::sqrt(static_cast<double>(total)); }
  std::optional<int> tied_variable() const override {
    return tied_to_.empty() ? std::nullopt : std::optional<int>(kernel_.id);
  }
  std::string tied_layer() const override { return tied_to_; }
  void set_tied_grad(Tensor grad) override { tied_grad_ = grad; }
  std::optional<TensorSplit> requested_split() const override { return requested_; }

  // Under bf16 the operand copies of the largest product, and the output gradient rounded
  // once for backward's two products (Layer::shared_operand). On sequence shards a column
  // layer's backward holds the whole input and the partial input gradient, a row layer's
  // passes the whole output (gradient); on top, either a product's operand copies or the
  // reordered copy a gather or reduce-scatter makes, which never run at once.
  int64_t transient_bytes(int64_t n) const override {
    const int64_t products =
        linear_scratch_bytes(n * product_rows_, in_, out_) + shared_operand_bytes(n * product_rows_, out_);
    if (!sequence_) return products;
    const int64_t whole = (column_ ? in_ : units_) * n * whole_length_ * static_cast<int64_t>(dtype_size(kActivationDType));
    return (column_ ? 2 : 1) * whole + std::max(products, whole);
  }

  double forward_flops() const override { return 2.0 * static_cast<double>(product_rows_) * in_ * out_; }

  // Column-parallel: this rank's slice of the units (kernel columns and bias). Row-parallel:
  // `in` is this rank's slice of the inputs (kernel rows); the bias stays whole.
  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 1 && in.rank() != 2)
      fail(fmt::format("expects (features,) or (sequence, features), got {}; add a flatten layer before it", in.str()));
    const TensorPlace& p = tensor_place();
    const TensorSplit split = p.degree > 1 ? p.split : TensorSplit::none;
    if (split == TensorSplit::column && (p.vocabulary ? units_ < p.degree : units_ % p.degree != 0))
      fail(fmt::format("units = {} does not split over a tensor degree of {}", units_, p.degree));
    in_ = in[in.rank() - 1];
    row_ = split == TensorSplit::row;
    column_ = split == TensorSplit::column;
    if (tied_to_.empty())
      declare_kernel(arena);
    else
      find_tied_table(arena);
    sequence_ = p.sequence && split != TensorSplit::none;
    out_ = column_ ? slice_begin(units_, p.rank + 1, p.degree) - slice_begin(units_, p.rank, p.degree) : units_;
    product_rows_ = sequence_ ? in[0] * (column_ ? p.degree : 1) : in.numel() / in_;
    if (!sequence_) return with_last(in, out_);
    if (in.rank() != 2) fail(fmt::format("sequence_parallel needs a sequence (sequence, features), got {}", in.str()));
    if (row_ && in[0] % p.degree != 0)
      fail(fmt::format("sequence_parallel: a sequence of {} does not split over a tensor degree of {}", in[0], p.degree));
    whole_length_ = column_ ? in[0] * p.degree : in[0];
    return Shape{row_ ? in[0] / p.degree : whole_length_, out_};
  }

  void forward(Ctx& ctx, const Tensor& x, Tensor y) override {
    if (sequence_) return forward_on_shards(ctx, x, y);
    const Tensor in = x.rows(in_), out = y.rows(y.shape[y.shape.rank() - 1]);
    product(ctx, in, out);
    if (row_) tensor_group(ctx).all_reduce(out, ReduceOp::sum);         // partial sums over the input slices
    finish_forward(ctx, out);
  }

  bool backward_reads_output() const override { return relu_; }  // the ReLU's mask
  bool rounds_output() const override { return use_bias_ && !relu_; }  // with the bias
  // Sequence shards gather their input over the tensor group first: float32 there.
  bool reads_inputs_as_products() const override { return !sequence_; }

  void backward(Ctx& ctx, const Tensor& x, const Tensor& y, Tensor dy, Tensor dx) override {
    if (sequence_) return backward_on_shards(ctx, x, y, dy, dx);
    const Tensor in = x.rows(in_), out = y.rows(y.shape[y.shape.rank() - 1]), dout = dy.rows(out.shape[1]);
    const Tensor din = dx.empty() ? dx : dx.rows(in_);
    if (relu_) ctx.backend.relu_backward(out, dout, dout);
    if (use_bias_) ctx.backend.bias_grad(dout, bias_.grad());
    Buffer rounded;
    const Tensor g = shared_operand(ctx, dout, rounded, !din.empty());
    weight_grad(ctx, in, g);
    if (din.empty()) return;
    input_grad(ctx, g, din);
    if (column_) tensor_group(ctx).all_reduce(din, ReduceOp::sum);         // each slice of the units contributes
  }

  TensorTraffic tensor_traffic(bool input_gradient) const override {
    using K = TensorCollective::Kind;
    TensorTraffic t;
    if (!sequence_) {
      if (row_) t.forward.push_back({K::all_reduce, product_rows_ * out_});
      if (column_ && input_gradient) t.backward.push_back({K::all_reduce, product_rows_ * in_});
      return t;
    }
    const int64_t whole_in = whole_length_ * in_, whole_out = whole_length_ * out_;
    if (column_) {  // the input gathered in each pass; its gradient reduce-scattered
      t.forward.push_back({K::all_gather, whole_in});
      t.backward.push_back({K::all_gather, whole_in});
      if (input_gradient) t.backward.push_back({K::reduce_scatter, whole_in});
    } else {  // the partial output reduce-scattered; its gradient gathered
      t.forward.push_back({K::reduce_scatter, whole_out});
      t.backward.push_back({K::all_gather, whole_out});
    }
    return t;
  }

  // Without a bias the kernel (or a tied table) is read by products only.
  bool reads_parameters_rounded(bool) const override { return !use_bias_ && matmul_dtype() == DType::bf16; }

 private:
  bool tied() const { return !tied_to_.empty(); }

  // y = x W (kernel (in, units)), or x E^T for a tied head (table (units, in)).
  void product(Ctx& ctx, const Tensor& x, Tensor y) const { matmul(ctx, false, tied(), x, kernel_.value(), 0.0f, y); }
  // dW += x^T dy; a tied head writes dE = dy^T x to the model's tied gradient instead (added
  // to the table's at the embedding).
  void weight_grad(Ctx& ctx, const Tensor& x, const Tensor& dy) const {
    if (tied()) return matmul(ctx, true, false, dy, x, 0.0f, tied_grad_);
    matmul(ctx, true, false, x, dy, 1.0f, kernel_.grad());
  }
  // dx = dy W^T, or dy E.
  void input_grad(Ctx& ctx, const Tensor& dy, Tensor dx) const { matmul(ctx, false, !tied(), dy, kernel_.value(), 0.0f, dx); }

  void declare_kernel(ParamArena& arena) {
    const TensorPlace& p = tensor_place();
    const int64_t full_in = row_ ? in_ * p.degree : in_;
    int64_t weights = 0;
    if (__builtin_mul_overflow(full_in, units_, &weights) || weights > kMaxExtent)
      fail(fmt::format("a kernel from {} inputs to {} units has too many weights", full_in, units_));
    const TensorSlice kernel_slice{column_ ? 1 : row_ ? 0 : -1, p.rank, p.degree};
    const bool normal = kernel_init_name_ == "normal" || kernel_init_name_ == "gpt2_residual";
    kernel_ = arena.declare(name(), "kernel", Shape{full_in, units_}, normal ? Init::normal : parse_init(kernel_init_name_),
                            full_in, units_, true, kernel_slice, kernel_init_name_ == "gpt2_residual" ? residual_stddev_ : 0.02);
    const TensorSlice bias_slice{column_ ? 0 : -1, p.rank, p.degree};
    if (use_bias_) bias_ = arena.declare(name(), "bias", Shape{units_}, Init::zeros, 0, 0, true, bias_slice);
  }

  // The tied embedding's table (units, in) was declared before this layer, in this arena,
  // split as this head is: by vocabulary, or not at all.
  void find_tied_table(ParamArena& arena) {
    const int id = arena.find(tied_to_, "embeddings");
    if (id < 0) fail(fmt::format("tied_to = '{}': no embedding layer of that name before this one (in this pipeline stage)", tied_to_));
    const Variable& table = arena.variables()[static_cast<size_t>(id)];
    if (table.full_shape[1] != in_ || table.full_shape[0] != units_)
      fail(fmt::format("tied_to = '{}': its table is {}, this head needs ({}, {}) (units, input features)", tied_to_,
                       table.full_shape.str(), units_, in_));
    DT_CHECK(table.slice.sliced() == column_, "layer '{}' and its table '{}' split differently", name(), tied_to_);
    kernel_ = ParamRef{&arena, id};
  }

  void finish_forward(Ctx& ctx, const Tensor& out) {
    if (use_bias_) ctx.backend.add_bias(out, bias_.value(), ctx.output_rounding);
    if (relu_) ctx.backend.relu(out, out);
  }

  // Sequence parallel: a column layer gathers its input's shards; a row layer's partial
  // outputs are reduce-scattered to this rank's positions.
  void forward_on_shards(Ctx& ctx, const Tensor& x, Tensor y) {
    const int64_t units = y.shape[y.shape.rank() - 1];
    if (column_) {
      const WholeSequence in(ctx, *this, x, true, whole_length_);
      product(ctx, in.view.rows(in_), y.rows(units));
    } else {
      Buffer partial(ctx.backend, Shape{x.shape[0], whole_length_, units});
      product(ctx, x.rows(in_), partial.view().rows(units));
      reduce_scatter_sequence(ctx, tensor_group(ctx), partial.view(), y);
    }
    finish_forward(ctx, y.rows(units));
  }

  // The column layer's input gradient, partial over its units' slices, is reduce-scattered;
  // the row layer's output gradient is gathered whole first.
  void backward_on_shards(Ctx& ctx, const Tensor& x, const Tensor& y, Tensor dy, Tensor dx) {
    const int64_t units = y.shape[y.shape.rank() - 1];
    if (relu_) ctx.backend.relu_backward(y, dy, dy);
    const WholeSequence in(ctx, *this, x, column_, whole_length_), dout(ctx, *this, dy, row_, whole_length_);
    if (use_bias_) ctx.backend.bias_grad(dout.view.rows(units), bias_.grad());
    Buffer rounded;
    const Tensor g = shared_operand(ctx, dout.view.rows(units), rounded, !dx.empty());
    weight_grad(ctx, in.view.rows(in_), g);
    if (dx.empty()) return;
    if (row_) return input_grad(ctx, g, dx.rows(in_));
    Buffer partial(ctx.backend, Shape{x.shape[0], whole_length_, in_});
    input_grad(ctx, g, partial.view().rows(in_));
    reduce_scatter_sequence(ctx, tensor_group(ctx), partial.view(), dx);
  }

  static Shape with_last(const Shape& in, int64_t last) {
    std::vector<int64_t> dims = in.dims();
    dims.back() = last;
    return Shape(std::move(dims));
  }

  int64_t units_, in_ = 0;  // in_: the input features this rank sees (a slice when row-parallel)
  int64_t out_ = 0;           // the units this rank computes (a slice when column-parallel)
  int64_t product_rows_ = 0;  // the rows per example its products see (the whole sequence under sequence_)
  bool use_bias_, relu_;
  bool column_ = false, row_ = false;
  bool sequence_ = false;     // column: input a sequence shard; row: output one
  int64_t whole_length_ = 0;  // the sequence's length, under sequence_
  std::string kernel_init_name_;
  double residual_stddev_ = 0.02;
  std::string tied_to_;
  Tensor tied_grad_;  // (units, in) with tied_to, owned by the model
  std::optional<TensorSplit> requested_;  // tensor_parallel; none: "replicated"
  ParamRef kernel_, bias_;
};

DT_REGISTER_LAYER("dense", Dense);

}  // namespace distrain
