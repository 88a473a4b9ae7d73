// conv2d: Keras Conv2D on NHWC input. kernel (kh, kw, in, out), bias (out), optional fused ReLU;
// column-parallel over its filters or row-parallel over its input channels on a mesh's
// tensor axis (layer.hpp, TensorSplit), as dense is over units and inputs.
#include "core/layers/padding.hpp"
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

class Conv2D final : public Layer {
 public:
  explicit Conv2D(ConfigTable& c)
      : filters_(c.get_int("filters")),
        kernel_(c.get_pair("kernel_size")),
        strides_(c.get_pair("strides", std::array<int64_t, 2>{1, 1})),
        same_(c.get_choice("padding", "valid", {"valid", "same"}) == "same"),
        use_bias_(c.get_bool("use_bias", true)),
        relu_(c.get_choice("activation", "none", {"none", "linear", "relu"}) == "relu"),
        kernel_init_(parse_init(c.get_choice("kernel_initializer", "glorot_uniform", {"glorot_uniform", "he_normal"}))),
        requested_(parse_tensor_request(c.get_choice("tensor_parallel", "auto", {"auto", "column", "row", "replicated"}))) {
    if (filters_ <= 0) c.fail("filters", "must be positive");
    if (filters_ > kMaxExtent) c.fail("filters", fmt::format("must be at most {}", kMaxExtent));
    for (const int64_t k : kernel_)
      if (k <= 0 || k > kMaxWindow) c.fail("kernel_size", fmt::format("must be in [1, {}]", kMaxWindow));
    for (const int64_t s : strides_)
      if (s <= 0 || s > kMaxWindow) c.fail("strides", fmt::format("must be in [1, {}]", kMaxWindow));
  }

  std::string type() const override { return "conv2d"; }
  Json settings() const override {
    return {{"filters", filters_}, {"kernel_size", kernel_}, {"strides", strides_}, {"padding", same_ ? "same" : "valid"},
            {"use_bias", use_bias_}, {"activation", relu_ ? "relu" : "linear"}};
  }
  bool can_split(TensorSplit split) const override {  // mixes all channels
    return split == TensorSplit::none || split == TensorSplit::column || split == TensorSplit::row;
  }
  std::optional<TensorSplit> requested_split() const override { return requested_; }

  double forward_flops() const override {
    const Conv2DSpec& c = spec_;
    return 2.0 * static_cast<double>(c.out_h) * c.out_w * c.out_c * c.kernel_h * c.kernel_w * c.in_c;
  }

  // Column-parallel: this rank's slice of the filters (kernel axis 3 and bias). Row-parallel:
  // `in` holds this rank's slice of the input channels (kernel axis 2); the bias stays whole.
  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 3) fail(fmt::format("expects (height, width, channels) input, got {}", in.str()));
    const TensorPlace& p = tensor_place();
    const TensorSplit split = p.degree > 1 ? p.split : TensorSplit::none;
    if (split == TensorSplit::column && filters_ % p.degree != 0)
      fail(fmt::format("filters = {} does not split over a tensor degree of {}", filters_, p.degree));
    column_ = split == TensorSplit::column;
    row_ = split == TensorSplit::row;
    const int64_t full_in = row_ ? in[2] * p.degree : in[2], out = column_ ? filters_ / p.degree : filters_;
    const Padding1D ph = pad_1d(in[0], kernel_[0], strides_[0], same_);
    const Padding1D pw = pad_1d(in[1], kernel_[1], strides_[1], same_);
    if (ph.out <= 0 || pw.out <= 0)
      fail(fmt::format("kernel {}x{} does not fit input {} with padding \"valid\"", kernel_[0], kernel_[1], in.str()));
    // Row-parallel, the bias and ReLU wait for the sum over the tensor group (forward()).
    spec_ = Conv2DSpec{in[0],     in[1],    in[2],     ph.out,    pw.out,   out,      kernel_[0], kernel_[1], strides_[0],
                       strides_[1], ph.before, ph.after, pw.before, pw.after, use_bias_ && !row_, relu_ && !row_};
    int64_t receptive = kernel_[0] * kernel_[1], fan_in = 0, fan_out = 0, weights = 0;  // receptive <= 2^32
    if (__builtin_mul_overflow(receptive, full_in, &fan_in) || __builtin_mul_overflow(receptive, filters_, &fan_out) ||
        __builtin_mul_overflow(fan_in, filters_, &weights) || weights > kMaxExtent)
      fail(fmt::format("a {}x{} kernel from {} to {} channels has too many weights", kernel_[0], kernel_[1], full_in, filters_));
    const TensorSlice kernel_slice{column_ ? 3 : row_ ? 2 : -1, p.rank, p.degree};
    kernel_ref_ = arena.declare(name(), "kernel", Shape{kernel_[0], kernel_[1], full_in, filters_}, kernel_init_, fan_in,
                                fan_out, true, kernel_slice);
    const TensorSlice bias_slice{column_ ? 0 : -1, p.rank, p.degree};
    if (use_bias_) bias_ref_ = arena.declare(name(), "bias", Shape{filters_}, Init::zeros, 0, 0, true, bias_slice);
    return Shape{ph.out, pw.out, out};
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    if (!op_) op_ = ctx.backend.make_conv2d(spec_);
    op_->forward(in, kernel_ref_.value(), spec_.bias ? bias_ref_.value() : Tensor{}, out);
    if (!row_) return;
    tensor_group(ctx).all_reduce(out, ReduceOp::sum);  // partial sums over the input-channel slices
    if (use_bias_) ctx.backend.add_bias(out, bias_ref_.value());
    if (relu_) ctx.backend.relu(out, out);
  }

  void backward(Ctx& ctx, const Tensor& in, const Tensor& out, Tensor dout, Tensor din) override {
    // With no input gradient to compute, the op applies the ReLU's mask as it reads dout
    // (one pass over the activations fewer for a first layer).
    const bool op_masks = relu_ && din.empty() && !row_;
    if (relu_ && !op_masks) ctx.backend.relu_backward(out, dout, dout);
    op_->backward_weights(in, dout, op_masks ? out : Tensor{}, kernel_ref_.grad(),
                          spec_.bias ? bias_ref_.grad() : Tensor{});
    if (row_ && use_bias_) ctx.backend.bias_grad(dout, bias_ref_.grad());  // the whole bias, outside the op
    if (din.empty()) return;
    op_->backward_data(dout, kernel_ref_.value(), din);
    if (column_) tensor_group(ctx).all_reduce(din, ReduceOp::sum);  // each slice of the filters contributes
  }

  TensorTraffic tensor_traffic(bool input_gradient) const override {
    using K = TensorCollective::Kind;
    TensorTraffic t;
    const int64_t out = spec_.out_h * spec_.out_w * spec_.out_c, in = spec_.in_h * spec_.in_w * spec_.in_c;
    if (row_) t.forward.push_back({K::all_reduce, out});                        // the partial sums
    if (column_ && input_gradient) t.backward.push_back({K::all_reduce, in});   // each slice's share
    return t;
  }

 private:
  int64_t filters_;
  std::array<int64_t, 2> kernel_, strides_;
  bool same_, use_bias_, relu_;
  bool column_ = false, row_ = false;
  Init kernel_init_;
  std::optional<TensorSplit> requested_;  // tensor_parallel; none: "replicated"
  Conv2DSpec spec_{};
  ParamRef kernel_ref_, bias_ref_;
  NotCopied<std::unique_ptr<Conv2DOp>> op_;
};

DT_REGISTER_LAYER("conv2d", Conv2D);

}  // namespace distrain
