// layer_norm: Keras LayerNormalization over the last axis: gamma (C) starts at 1, beta (C)
// at 0; each row's mean and 1/std are kept from forward for the backward.
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

class LayerNorm final : public Layer {
 public:
  explicit LayerNorm(ConfigTable& c) : epsilon_(static_cast<float>(c.get_float("epsilon", 1e-5))) {
    if (!(epsilon_ > 0.0f)) c.fail("epsilon", "must be positive");
  }
  std::string type() const override { return "layer_norm"; }
  Json settings() const override { return {{"epsilon", epsilon_}}; }
  bool per_position() const override { return true; }

  Shape setup(const Shape& in, ParamArena& arena) override {
    const int64_t c = in[in.rank() - 1];
    rows_per_example_ = in.numel() / c;
    gamma_ = arena.declare(name(), "gamma", Shape{c}, Init::ones, 0, 0, true);
    beta_ = arena.declare(name(), "beta", Shape{c}, Init::zeros, 0, 0, true);
    return in;
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    const int64_t rows = in.shape[0] * rows_per_example_;
    if (mean_.empty() || mean_.view().numel() != rows) {
      mean_ = Buffer(ctx.backend, Shape{rows});
      rstd_ = Buffer(ctx.backend, Shape{rows});
    }
    ctx.backend.layer_norm(in, gamma_.value(), beta_.value(), epsilon_, out, mean_.view(), rstd_.view(),
                           ctx.output_rounding);
  }
  bool rounds_output() const override { return true; }

  bool backward_reads_output() const override { return false; }
  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor din) override {
    ctx.backend.layer_norm_backward(in, dout, gamma_.value(), mean_.view(), rstd_.view(), din, gamma_.grad(),
                                    beta_.grad());
  }

  int64_t workspace_bytes(int64_t n) const override {
    return 2 * n * rows_per_example_ * static_cast<int64_t>(dtype_size(kActivationDType));
  }

  void release_workspace() override {
    mean_ = Buffer();
    rstd_ = Buffer();
  }

 private:
  float epsilon_;
  int64_t rows_per_example_ = 1;
  ParamRef gamma_, beta_;
  NotCopied<Buffer> mean_, rstd_;  // (rows) of the last forward
};

DT_REGISTER_LAYER("layer_norm", LayerNorm);

}  // namespace distrain
