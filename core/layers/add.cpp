// add: the sum of two inputs of one shape (a residual connection, Keras Add). Its two
// input gradients are the output's.
#include "core/layers/registry.hpp"

namespace distrain {

class Add final : public Layer {
 public:
  explicit Add(ConfigTable&) {}
  std::string type() const override { return "add"; }
  int arity() const override { return 2; }
  bool per_position() const override { return true; }

  Shape setup_inputs(const std::vector<Shape>& in, ParamArena&) override {
    if (in.at(0) != in.at(1)) fail(fmt::format("adds inputs of one shape, got {} and {}", in[0].str(), in[1].str()));
    return in[0];
  }
  void forward_inputs(Ctx& ctx, const std::vector<Tensor>& in, Tensor out) override {
    ctx.backend.add(in.at(0), in.at(1), out, ctx.output_rounding);
  }
  bool rounds_output() const override { return true; }
  bool backward_reads_inputs() const override { return false; }
  bool backward_reads_output() const override { return false; }
  void backward_inputs(Ctx& ctx, const std::vector<Tensor>&, const Tensor&, Tensor dout,
                       const std::vector<Tensor>& din) override {
    for (const Tensor& d : din)
      if (!d.empty()) ctx.backend.copy(dout, d);
  }

  // The model calls the two-input versions above only.
  Shape setup(const Shape&, ParamArena&) override { fail("takes two inputs"); }
  void forward(Ctx&, const Tensor&, Tensor) override { fail("takes two inputs"); }
  void backward(Ctx&, const Tensor&, const Tensor&, Tensor, Tensor) override { fail("takes two inputs"); }
};

DT_REGISTER_LAYER("add", Add);

}  // namespace distrain
