#include "core/base/json.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

// Keras Rescaling: y = x * scale + offset (e.g. scale = 1/255 for raw pixels).
class Rescaling final : public Layer {
 public:
  explicit Rescaling(ConfigTable& c)
      : scale_(static_cast<float>(c.get_float("scale"))), offset_(static_cast<float>(c.get_float("offset", 0.0))) {}
  std::string type() const override { return "rescaling"; }
  Json settings() const override { return {{"scale", scale_}, {"offset", offset_}}; }
  bool elementwise() const override { return true; }
  Shape setup(const Shape& in, ParamArena&) override { return in; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { ctx.backend.scale_shift(in, out, scale_, offset_); }
  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) ctx.backend.scale_shift(dout, din, scale_, 0.0f);
  }

 private:
  float scale_, offset_;
};

DT_REGISTER_LAYER("rescaling", Rescaling);

}  // namespace distrain
