// Shape-preserving layers without parameters: relu, rescaling, dropout, flatten.
#include "core/base/rng.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

class Relu final : public Layer {
 public:
  explicit Relu(ConfigTable&) {}
  std::string type() const override { return "relu"; }
  Shape setup(const Shape& in, ParamArena&) override { return in; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { ctx.backend.relu(in, out); }
  void backward(Ctx& ctx, const Tensor&, const Tensor& out, Tensor dout, Tensor din) override {
    if (din.empty()) return;
    ctx.backend.relu_backward(out, dout);
    ctx.backend.copy(dout, din);
  }
};

// Keras Rescaling: y = x * scale + offset (e.g. scale = 1/255 for raw pixels).
class Rescaling final : public Layer {
 public:
  explicit Rescaling(ConfigTable& c)
      : scale_(static_cast<float>(c.get_float("scale"))), offset_(static_cast<float>(c.get_float("offset", 0.0))) {}
  std::string type() const override { return "rescaling"; }
  Shape setup(const Shape& in, ParamArena&) override { return in; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { ctx.backend.scale_shift(in, out, scale_, offset_); }
  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) ctx.backend.scale_shift(dout, din, scale_, 0.0f);
  }

 private:
  float scale_, offset_;
};

// Inverted dropout: kept units are scaled by 1/(1-rate) in training; identity in inference.
// The mask is a function of (step seed, layer index, element), so backward redraws it.
class Dropout final : public Layer {
 public:
  explicit Dropout(ConfigTable& c) : rate_(static_cast<float>(c.get_float("rate"))) {
    if (rate_ < 0.0f || rate_ >= 1.0f) c.fail("rate", "must be in [0, 1)");
  }
  std::string type() const override { return "dropout"; }
  Shape setup(const Shape& in, ParamArena&) override { return in; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    if (ctx.training && rate_ > 0.0f)
      ctx.backend.dropout(in, out, rate_, seed(ctx));
    else
      ctx.backend.copy(in, out);
  }
  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (din.empty()) return;
    if (rate_ > 0.0f)
      ctx.backend.dropout(dout, din, rate_, seed(ctx));
    else
      ctx.backend.copy(dout, din);
  }

 private:
  uint64_t seed(const Ctx& ctx) const { return derive_seed(ctx.step_seed, static_cast<uint64_t>(index())); }
  float rate_;
};

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

DT_REGISTER_LAYER("relu", Relu);
DT_REGISTER_LAYER("rescaling", Rescaling);
DT_REGISTER_LAYER("dropout", Dropout);
DT_REGISTER_LAYER("flatten", Flatten);

}  // namespace distrain
