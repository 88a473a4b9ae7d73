#include "core/layers/registry.hpp"

namespace distrain {

// Flatten in NHWC order (H, then W, then C), as Keras with channels_last.
class Flatten final : public Layer {
 public:
  explicit Flatten(ConfigTable&) {}
  std::string type() const override { return "flatten"; }
  Shape setup(const Shape& in, ParamArena&) override { return Shape{in.numel()}; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { ctx.backend.copy(in, out); }
  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) ctx.backend.copy(dout, din);
  }
};

DT_REGISTER_LAYER("flatten", Flatten);

}  // namespace distrain
