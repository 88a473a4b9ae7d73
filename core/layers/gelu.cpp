// gelu: GPT-2's GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#include "core/layers/registry.hpp"

namespace distrain {

class Gelu final : public Layer {
 public:
  explicit Gelu(ConfigTable&) {}
  std::string type() const override { return "gelu"; }
  bool elementwise() const override { return true; }
  Shape setup(const Shape& in, ParamArena&) override { return in; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { ctx.backend.gelu(in, out, ctx.output_rounding); }
  bool rounds_output() const override { return true; }
  bool backward_reads_output() const override { return false; }
  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) ctx.backend.gelu_backward(in, dout, din);
  }
};

DT_REGISTER_LAYER("gelu", Gelu);

}  // namespace distrain
