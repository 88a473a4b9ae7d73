// dense: Keras Dense on a flat input. kernel (in, units), bias (units), optional ReLU;
// column- or row-parallel over a mesh's tensor axis (layer.hpp, TensorSplit).
#include "core/layers/registry.hpp"

namespace distrain {

class Dense final : public Layer {
 public:
  explicit Dense(ConfigTable& c)
      : units_(c.get_int("units")),
        use_bias_(c.get_bool("use_bias", true)),
        relu_(c.get_choice("activation", "none", {"none", "linear", "relu"}) == "relu"),
        kernel_init_(parse_init(c.get_choice("kernel_initializer", "glorot_uniform", {"glorot_uniform", "he_normal"}))),
        requested_(parse_tensor_request(c.get_choice("tensor_parallel", "auto", {"auto", "column", "row", "replicated"}))) {
    if (units_ <= 0) c.fail("units", "must be positive");
  }

  std::string type() const override { return "dense"; }
  bool can_split(TensorSplit split) const override { return split != TensorSplit::sliced; }  // mixes all features
  std::optional<TensorSplit> requested_split() const override { return requested_; }

  // Column-parallel: this rank's slice of the units (kernel columns and bias). Row-parallel:
  // `in` is this rank's slice of the inputs (kernel rows); the bias stays whole.
  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 1) fail(fmt::format("expects a flat input (features,), got {}; add a flatten layer before it", in.str()));
    const TensorPlace& p = tensor_place();
    const TensorSplit split = p.degree > 1 ? p.split : TensorSplit::none;
    if (split == TensorSplit::column && units_ % p.degree != 0)
      fail(fmt::format("units = {} does not split over a tensor degree of {}", units_, p.degree));
    in_ = in[0];
    const int64_t full_in = split == TensorSplit::row ? in_ * p.degree : in_;
    int64_t weights = 0;
    if (__builtin_mul_overflow(full_in, units_, &weights) || weights > kMaxExtent)
      fail(fmt::format("a kernel from {} inputs to {} units has too many weights", full_in, units_));
    const TensorSlice kernel_slice{split == TensorSplit::column ? 1 : split == TensorSplit::row ? 0 : -1, p.rank, p.degree};
    kernel_ = arena.declare(name(), "kernel", Shape{full_in, units_}, kernel_init_, full_in, units_, true, kernel_slice);
    const TensorSlice bias_slice{split == TensorSplit::column ? 0 : -1, p.rank, p.degree};
    if (use_bias_) bias_ = arena.declare(name(), "bias", Shape{units_}, Init::zeros, 0, 0, true, bias_slice);
    row_ = split == TensorSplit::row;
    column_ = split == TensorSplit::column;
    return Shape{column_ ? units_ / p.degree : units_};
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    ctx.backend.gemm(false, false, 1.0f, in, kernel_.value(), 0.0f, out);  // (N, in) x (in, units)
    if (row_) tensor_group(ctx).all_reduce(out, ReduceOp::sum);         // partial sums over the input slices
    if (use_bias_) ctx.backend.add_bias(out, bias_.value());
    if (relu_) ctx.backend.relu(out, out);
  }

  void backward(Ctx& ctx, const Tensor& in, const Tensor& out, Tensor dout, Tensor din) override {
    if (relu_) ctx.backend.relu_backward(out, dout, dout);
    ctx.backend.gemm(true, false, 1.0f, in, dout, 1.0f, kernel_.grad());  // dW += x^T dy
    if (use_bias_) ctx.backend.bias_grad(dout, bias_.grad());
    if (din.empty()) return;
    ctx.backend.gemm(false, true, 1.0f, dout, kernel_.value(), 0.0f, din);  // dx = dy W^T
    if (column_) tensor_group(ctx).all_reduce(din, ReduceOp::sum);         // each slice of the units contributes
  }

 private:
  int64_t units_, in_ = 0;  // in_: the input features this rank sees (a slice when row-parallel)
  bool use_bias_, relu_;
  bool column_ = false, row_ = false;
  Init kernel_init_;
  std::optional<TensorSplit> requested_;  // tensor_parallel; none: "replicated"
  ParamRef kernel_, bias_;
};

DT_REGISTER_LAYER("dense", Dense);

}  // namespace distrain
