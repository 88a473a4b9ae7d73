// relu: Keras ReLU layer (max(x, 0)).
#include "core/layers/registry.hpp"

namespace distrain {

class Relu final : public Layer {
 public:
  explicit Relu(ConfigTable&) {}
  std::string type() const override { return "relu"; }
  bool elementwise() const override { return true; }
  Shape setup(const Shape& in, ParamArena&) override { return in; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { ctx.backend.relu(in, out); }
  void backward(Ctx& ctx, const Tensor&, const Tensor& out, Tensor dout, Tensor din) override {
    if (din.empty()) return;
    ctx.backend.relu_backward(out, dout, din);
  }
};

DT_REGISTER_LAYER("relu", Relu);

}  // namespace distrain
