// gated_mlp: a transformer block's gated feed-forward (Shazeer 2020; Llama's SwiGLU MLP) on
// (T, C): h = x W_gate_up (C -> 2F, [gate | up]), a = act(gate) * up with act SiLU (SwiGLU)
// or GPT-2's GELU (GeGLU), out = a W_down (F -> C). No biases unless use_bias. Kernels start
// N(0, 0.02), W_down scaled by 1/sqrt(residual projections in the model) as it writes into
// the residual stream. Forward keeps h (2F per token); backward recomputes a from it.
// Over a mesh's tensor axis it splits as Megatron's MLP (TensorSplit::heads): rank r of d
// holds units [r F/d, (r+1) F/d) of both the gate and the up halves and those rows of
// W_down; the partial outputs are summed over the group, then the (whole) bias added. With
// sequence parallelism its input and output are sequence shards: the input all-gathered
// (again in backward), the partial outputs reduce-scattered.
#include <algorithm>
#include <cmath>

#include "core/base/json.hpp"
#include "core/layers/registry.hpp"
#include "core/layers/sequence_shard.hpp"

namespace distrain {

class GatedMlp final : public Layer {
 public:
  explicit GatedMlp(ConfigTable& c)
      : units_(c.get_int("units")),
        activation_(c.get_choice("activation", "silu", {"silu", "gelu"}) == "silu" ? GateActivation::silu
                                                                                   : GateActivation::gelu),
        use_bias_(c.get_bool("use_bias", false)),
        requested_(parse_tensor_request(c.get_choice("tensor_parallel", "auto", {"auto", "heads", "replicated"}))) {
    if (units_ <= 0) c.fail("units", "must be positive");
  }

  std::string type() const override { return "gated_mlp"; }
  Json settings() const override {
    return {{"units", units_}, {"activation", activation_ == GateActivation::silu ? "silu" : "gelu"}, {"use_bias", use_bias_}};
  }
  bool can_split(TensorSplit split) const override { return split == TensorSplit::none || split == TensorSplit::heads; }
  std::optional<TensorSplit> requested_split() const override { return requested_; }
  int residual_projections() const override { return 1; }
  void set_residual_projections(int total) override { residual_stddev_ = 0.02 / std::sqrt(static_cast<double>(total)); }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 2) fail(fmt::format("expects a sequence (sequence, features), got {}", in.str()));
    const TensorPlace& p = tensor_place();
    sequence_ = p.sequence && p.degree > 1;
    t_ = sequence_ ? in[0] * p.degree : in[0];
    c_ = in[1];
    split_ = p.split == TensorSplit::heads && p.degree > 1;
    const int degree = split_ ? p.degree : 1;
    if (units_ % degree != 0)
      fail(fmt::format("units = {} do not split over a tensor degree of {}: use a degree that divides them", units_,
                       degree));
    local_units_ = units_ / degree;
    const TensorSlice halves{split_ ? 1 : -1, p.rank, degree, 2}, bias_halves{split_ ? 0 : -1, p.rank, degree, 2},
        down_rows{split_ ? 0 : -1, p.rank, degree};
    gate_up_kernel_ =
        arena.declare(name(), "gate_up_kernel", Shape{c_, 2 * units_}, Init::normal, c_, 2 * units_, true, halves);
    if (use_bias_) gate_up_bias_ = arena.declare(name(), "gate_up_bias", Shape{2 * units_}, Init::zeros, 0, 0, true, bias_halves);
    down_kernel_ =
        arena.declare(name(), "down_kernel", Shape{units_, c_}, Init::normal, units_, c_, true, down_rows, residual_stddev_);
    if (use_bias_) down_bias_ = arena.declare(name(), "down_bias", Shape{c_}, Init::zeros, 0, 0, true);
    return in;
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    const int64_t n = in.shape[0], rows = n * t_;
    if (h_.empty() || h_.shape()[0] != rows) h_ = Buffer(ctx.backend, Shape{rows, 2 * local_units_});
    const WholeSequence x(ctx, *this, in, sequence_, t_);
    matmul(ctx, false, false, x.view.rows(c_), gate_up_kernel_.value(), 0.0f, h_.view());
    if (use_bias_) ctx.backend.add_bias(h_.view(), gate_up_bias_.value());
    const Buffer a(ctx.backend, Shape{rows, local_units_});
    ctx.backend.gated_unit(h_.view(), activation_, a.view());
    if (sequence_) {  // each rank's units' share, summed into this rank's positions
      Buffer partial(ctx.backend, Shape{n, t_, c_});
      matmul(ctx, false, false, a.view(), down_kernel_.value(), 0.0f, partial.view().rows(c_));
      reduce_scatter_sequence(ctx, tensor_group(ctx), partial.view(), out);
    } else {
      matmul(ctx, false, false, a.view(), down_kernel_.value(), 0.0f, out.rows(c_));
      if (split_) tensor_group(ctx).all_reduce(out, ReduceOp::sum);  // each rank's units' share
    }
    if (use_bias_)
      ctx.backend.add_bias(out, down_bias_.value(), ctx.output_rounding);
    else if (ctx.output_rounding.round)
      ctx.backend.to_bf16(out, ctx.output_rounding.packed);
  }
  bool rounds_output() const override { return true; }

  bool backward_reads_output() const override { return false; }  // it keeps h
  bool reads_inputs_as_products() const override { return !sequence_; }
  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor din) override {
    const int64_t rows = in.shape[0] * t_;
    const WholeSequence dy_whole(ctx, *this, dout, sequence_, t_);
    if (use_bias_) ctx.backend.bias_grad(dy_whole.view.rows(c_), down_bias_.grad());
    const Buffer dh_buffer(ctx.backend, Shape{rows, 2 * local_units_});
    {
      const Buffer a(ctx.backend, Shape{rows, local_units_}), da(ctx.backend, Shape{rows, local_units_});
      ctx.backend.gated_unit(h_.view(), activation_, a.view());
      Buffer rounded;
      const Tensor dy = shared_operand(ctx, dy_whole.view.rows(c_), rounded, true);
      matmul(ctx, true, false, a.view(), dy, 1.0f, down_kernel_.grad());
      matmul(ctx, false, true, dy, down_kernel_.value(), 0.0f, da.view());
      ctx.backend.gated_unit_backward(h_.view(), activation_, da.view(), dh_buffer.view());
    }
    if (use_bias_) ctx.backend.bias_grad(dh_buffer.view(), gate_up_bias_.grad());
    Buffer rounded;
    const Tensor g = shared_operand(ctx, dh_buffer.view(), rounded, !din.empty());
    const WholeSequence x(ctx, *this, in, sequence_, t_);
    matmul(ctx, true, false, x.view.rows(c_), g, 1.0f, gate_up_kernel_.grad());
    if (din.empty()) return;
    if (sequence_) {
      Buffer partial(ctx.backend, Shape{in.shape[0], t_, c_});
      matmul(ctx, false, true, g, gate_up_kernel_.value(), 0.0f, partial.view().rows(c_));
      reduce_scatter_sequence(ctx, tensor_group(ctx), partial.view(), din);
      return;
    }
    matmul(ctx, false, true, g, gate_up_kernel_.value(), 0.0f, din.rows(c_));
    if (split_) tensor_group(ctx).all_reduce(din, ReduceOp::sum);  // each rank's units' share
  }

  TensorTraffic tensor_traffic(bool input_gradient) const override {
    return paired_split_traffic(sequence_, split_, t_ * c_, input_gradient);
  }

  // Backward holds a and its gradient (F each per token) and dh (2F), plus one rounded
  // copy of a shared operand; on sequence shards the whole output gradient, the whole
  // input and the partial input gradient. On top, the largest product's operand copies
  // (bf16) or a gather's reordered copy: never at once.
  int64_t transient_bytes(int64_t n) const override {
    const auto element = static_cast<int64_t>(dtype_size(kActivationDType));
    const int64_t rows = n * t_;
    const int64_t products =
        std::max(linear_scratch_bytes(rows, c_, 2 * local_units_), linear_scratch_bytes(rows, local_units_, c_));
    const int64_t rounded = std::max(shared_operand_bytes(rows, c_), shared_operand_bytes(rows, 2 * local_units_));
    const int64_t whole = sequence_ ? rows * c_ * element : 0;
    return 4 * local_units_ * rows * element + 3 * whole + rounded + std::max(products, whole);
  }
  // x W_gate and x W_up, then the product with W_down.
  double forward_flops() const override { return 6.0 * static_cast<double>(t_) * c_ * local_units_; }

  // h (2F per token) in float32.
  int64_t workspace_bytes(int64_t n) const override {
    return n * t_ * 2 * local_units_ * static_cast<int64_t>(dtype_size(kActivationDType));
  }
  void release_workspace() override { h_ = Buffer(); }

 private:
  int64_t units_;
  GateActivation activation_;
  bool use_bias_;
  std::optional<TensorSplit> requested_;
  double residual_stddev_ = 0.02;
  int64_t t_ = 0, c_ = 0, local_units_ = 0;
  bool split_ = false, sequence_ = false;
  ParamRef gate_up_kernel_, gate_up_bias_, down_kernel_, down_bias_;
  NotCopied<Buffer> h_;  // (N T, 2F) of the last forward
};

DT_REGISTER_LAYER("gated_mlp", GatedMlp);

}  // namespace distrain
