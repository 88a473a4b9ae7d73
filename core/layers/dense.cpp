// dense: Keras Dense on a flat input. kernel (in, units), bias (units), optional ReLU.
#include "core/layers/registry.hpp"

namespace distrain {

class Dense final : public Layer {
 public:
  explicit Dense(ConfigTable& c)
      : units_(c.get_int("units")),
        use_bias_(c.get_bool("use_bias", true)),
        relu_(c.get_choice("activation", "none", {"none", "linear", "relu"}) == "relu"),
        kernel_init_(parse_init(c.get_choice("kernel_initializer", "glorot_uniform", {"glorot_uniform", "he_normal"}))) {
    if (units_ <= 0) c.fail("units", "must be positive");
  }

  std::string type() const override { return "dense"; }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 1) fail(fmt::format("expects a flat input (features,), got {}; add a flatten layer before it", in.str()));
    in_ = in[0];
    int64_t weights = 0;
    if (__builtin_mul_overflow(in_, units_, &weights) || weights > kMaxExtent)
      fail(fmt::format("a kernel from {} inputs to {} units has too many weights", in_, units_));
    kernel_ = arena.declare(name(), "kernel", Shape{in_, units_}, kernel_init_, in_, units_, true);
    if (use_bias_) bias_ = arena.declare(name(), "bias", Shape{units_}, Init::zeros, 0, 0, true);
    return Shape{units_};
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    ctx.backend.gemm(false, false, 1.0f, in, kernel_.value(), 0.0f, out);  // (N, in) x (in, units)
    if (use_bias_) ctx.backend.add_bias(out, bias_.value());
    if (relu_) ctx.backend.relu(out, out);
  }

  void backward(Ctx& ctx, const Tensor& in, const Tensor& out, Tensor dout, Tensor din) override {
    if (relu_) ctx.backend.relu_backward(out, dout);
    ctx.backend.gemm(true, false, 1.0f, in, dout, 1.0f, kernel_.grad());  // dW += x^T dy
    if (use_bias_) ctx.backend.bias_grad(dout, bias_.grad());
    if (!din.empty()) ctx.backend.gemm(false, true, 1.0f, dout, kernel_.value(), 0.0f, din);  // dx = dy W^T
  }

 private:
  int64_t units_, in_ = 0;
  bool use_bias_, relu_;
  Init kernel_init_;
  ParamRef kernel_, bias_;
};

DT_REGISTER_LAYER("dense", Dense);

}  // namespace distrain
