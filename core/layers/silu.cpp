// silu: the sigmoid-weighted linear unit, x sigmoid(x) (also called swish).
#include "core/layers/registry.hpp"

namespace distrain {

class Silu final : public Layer {
 public:
  explicit Silu(ConfigTable&) {}
  std::string type() const override { return "silu"; }
  bool elementwise() const override { return true; }
  Shape setup(const Shape& in, ParamArena&) override { return in; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { ctx.backend.silu(in, out, ctx.output_rounding); }
  bool rounds_output() const override { return true; }
  bool backward_reads_output() const override { return false; }
  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) ctx.backend.silu_backward(in, dout, din);
  }
};

DT_REGISTER_LAYER("silu", Silu);

}  // namespace distrain
