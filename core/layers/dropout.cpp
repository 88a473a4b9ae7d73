#include "core/base/rng.hpp"
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

// Inverted dropout: kept units are scaled by 1/(1-rate) in training; identity in inference.
// The mask is a function of (step seed, layer index, element), so backward redraws it.
class Dropout final : public Layer {
 public:
  explicit Dropout(ConfigTable& c) : rate_(static_cast<float>(c.get_float("rate"))) {
    if (rate_ < 0.0f || rate_ >= 1.0f) c.fail("rate", "must be in [0, 1)");
  }
  std::string type() const override { return "dropout"; }
  Json settings() const override { return {{"rate", rate_}}; }
  bool elementwise() const override { return true; }
  Shape setup(const Shape& in, ParamArena&) override { return in; }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    if (ctx.training && rate_ > 0.0f)
      ctx.backend.dropout(in, out, rate_, seed(ctx));
    else
      ctx.backend.copy(in, out);
  }
  bool backward_reads_inputs() const override { return false; }
  bool backward_reads_output() const override { return false; }
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

DT_REGISTER_LAYER("dropout", Dropout);

}  // namespace distrain
