// position_embedding: adds a learned vector per position to a sequence (T, C); the table
// (T, C) is initialised N(0, 0.02) as GPT-2's.
#include "core/layers/registry.hpp"

namespace distrain {

class PositionEmbedding final : public Layer {
 public:
  explicit PositionEmbedding(ConfigTable&) {}
  std::string type() const override { return "position_embedding"; }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 2) fail(fmt::format("expects a sequence (sequence, features), got {}", in.str()));
    table_ = arena.declare(name(), "embeddings", in, Init::normal, in[0], in[1], true);
    return in;
  }

  // Seen as (N, T*C), the table is a bias over each example.
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    ctx.backend.copy(in, out);
    ctx.backend.add_bias(flat(out), table_.value().reshaped(Shape{table_.value().numel()}));
  }

  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    ctx.backend.bias_grad(flat(dout), table_.grad().reshaped(Shape{table_.grad().numel()}));
    if (!din.empty()) ctx.backend.copy(dout, din);
  }

 private:
  static Tensor flat(const Tensor& t) { return t.rows(t.numel() / t.shape[0]); }
  ParamRef table_;
};

DT_REGISTER_LAYER("position_embedding", PositionEmbedding);

}  // namespace distrain
