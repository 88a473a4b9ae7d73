// conv2d: Keras Conv2D on NHWC input. kernel (kh, kw, in, out), bias (out), optional fused ReLU.
#include "core/layers/padding.hpp"
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
        kernel_init_(parse_init(c.get_choice("kernel_initializer", "glorot_uniform", {"glorot_uniform", "he_normal"}))) {
    if (filters_ <= 0) c.fail("filters", "must be positive");
    if (filters_ > kMaxExtent) c.fail("filters", fmt::format("must be at most {}", kMaxExtent));
    for (const int64_t k : kernel_)
      if (k <= 0 || k > kMaxWindow) c.fail("kernel_size", fmt::format("must be in [1, {}]", kMaxWindow));
    for (const int64_t s : strides_)
      if (s <= 0 || s > kMaxWindow) c.fail("strides", fmt::format("must be in [1, {}]", kMaxWindow));
  }

  std::string type() const override { return "conv2d"; }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 3) fail(fmt::format("expects (height, width, channels) input, got {}", in.str()));
    const Padding1D ph = pad_1d(in[0], kernel_[0], strides_[0], same_);
    const Padding1D pw = pad_1d(in[1], kernel_[1], strides_[1], same_);
    if (ph.out <= 0 || pw.out <= 0)
      fail(fmt::format("kernel {}x{} does not fit input {} with padding \"valid\"", kernel_[0], kernel_[1], in.str()));
    spec_ = Conv2DSpec{in[0], in[1], in[2], ph.out, pw.out, filters_, kernel_[0], kernel_[1], strides_[0], strides_[1],
                       ph.before, ph.after, pw.before, pw.after, use_bias_, relu_};
    int64_t receptive = kernel_[0] * kernel_[1], fan_in = 0, fan_out = 0, weights = 0;  // receptive <= 2^32
    if (__builtin_mul_overflow(receptive, in[2], &fan_in) || __builtin_mul_overflow(receptive, filters_, &fan_out) ||
        __builtin_mul_overflow(fan_in, filters_, &weights) || weights > kMaxExtent)
      fail(fmt::format("a {}x{} kernel from {} to {} channels has too many weights", kernel_[0], kernel_[1], in[2], filters_));
    kernel_ref_ = arena.declare(name(), "kernel", Shape{kernel_[0], kernel_[1], in[2], filters_}, kernel_init_, fan_in,
                                fan_out, true);
    if (use_bias_) bias_ref_ = arena.declare(name(), "bias", Shape{filters_}, Init::zeros, 0, 0, true);
    return Shape{ph.out, pw.out, filters_};
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    if (!op_) op_ = ctx.backend.make_conv2d(spec_);
    op_->forward(in, kernel_ref_.value(), use_bias_ ? bias_ref_.value() : Tensor{}, out);
  }

  void backward(Ctx& ctx, const Tensor& in, const Tensor& out, Tensor dout, Tensor din) override {
    if (relu_) ctx.backend.relu_backward(out, dout);
    op_->backward_weights(in, dout, kernel_ref_.grad(), use_bias_ ? bias_ref_.grad() : Tensor{});
    if (!din.empty()) op_->backward_data(dout, kernel_ref_.value(), din);
  }

 private:
  int64_t filters_;
  std::array<int64_t, 2> kernel_, strides_;
  bool same_, use_bias_, relu_;
  Init kernel_init_;
  Conv2DSpec spec_{};
  ParamRef kernel_ref_, bias_ref_;
  std::unique_ptr<Conv2DOp> op_;
};

DT_REGISTER_LAYER("conv2d", Conv2D);

}  // namespace distrain
