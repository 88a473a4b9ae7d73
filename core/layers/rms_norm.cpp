// rms_norm: RMSNorm over the last axis (Zhang & Sennrich 2019; Llama's): x / sqrt(mean(x^2)
// + epsilon) * gamma, gamma (C) starting at 1, no shift; each row's reciprocal root mean
// square kept from forward for the backward.
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

class RmsNorm final : public Layer {
 public:
  explicit RmsNorm(ConfigTable& c) : epsilon_(static_cast<float>(c.get_float("epsilon", 1e-6))) {
    if (!(epsilon_ > 0.0f)) c.fail("epsilon", "must be positive");
  }
  std::string type() const override { return "rms_norm"; }
  Json settings() const override { return {{"epsilon", epsilon_}}; }
  bool per_position() const override { return true; }

  Shape setup(const Shape& in, ParamArena& arena) override {
    const int64_t c = in[in.rank() - 1];
    rows_per_example_ = in.numel() / c;
    gamma_ = arena.declare(name(), "gamma", Shape{c}, Init::ones, 0, 0, true);
    return in;
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    const int64_t rows = in.shape[0] * rows_per_example_;
    if (rstd_.empty() || rstd_.view().numel() != rows) rstd_ = Buffer(ctx.backend, Shape{rows});
    ctx.backend.rms_norm(in, gamma_.value(), epsilon_, out, rstd_.view(), ctx.output_rounding);
  }
  bool rounds_output() const override { return true; }

  bool backward_reads_output() const override { return false; }
  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor din) override {
    ctx.backend.rms_norm_backward(in, dout, gamma_.value(), rstd_.view(), din, gamma_.grad());
  }

  int64_t workspace_bytes(int64_t n) const override {
    return n * rows_per_example_ * static_cast<int64_t>(dtype_size(kActivationDType));
  }
  void release_workspace() override { rstd_ = Buffer(); }

 private:
  float epsilon_;
  int64_t rows_per_example_ = 1;
  ParamRef gamma_;
  NotCopied<Buffer> rstd_;  // (rows) of the last forward
};

DT_REGISTER_LAYER("rms_norm", RmsNorm);

}  // namespace distrain
