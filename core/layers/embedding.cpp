// embedding: token ids (T,) int32 -> their vectors (T, output_dim), from a table
// (input_dim, output_dim) initialised N(0, 0.02) as GPT-2. An output head can be tied to
// the table (dense's tied_to), which then gets the gradient of both uses.
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

class Embedding final : public Layer {
 public:
  explicit Embedding(ConfigTable& c) : vocabulary_(c.get_int("input_dim")), width_(c.get_int("output_dim")) {
    if (vocabulary_ <= 0) c.fail("input_dim", "must be positive: the vocabulary size");
    if (width_ <= 0) c.fail("output_dim", "must be positive: the embedding width");
  }

  std::string type() const override { return "embedding"; }
  Json settings() const override { return {{"input_dim", vocabulary_}, {"output_dim", width_}}; }
  DType input_dtype() const override { return DType::i32; }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 1) fail(fmt::format("expects token ids (sequence,), got {}", in.str()));
    int64_t weights = 0;
    if (__builtin_mul_overflow(vocabulary_, width_, &weights) || weights > kMaxExtent)
      fail(fmt::format("a table of {} x {} has too many weights", vocabulary_, width_));
    table_ = arena.declare(name(), "embeddings", Shape{vocabulary_, width_}, Init::normal, vocabulary_, width_, true);
    return Shape{in[0], width_};
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { ctx.backend.embedding(table_.value(), in, out); }

  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor) override {
    ctx.backend.embedding_backward(in, dout, table_.grad());  // token ids have no gradient
  }

 private:
  int64_t vocabulary_, width_;
  ParamRef table_;
};

DT_REGISTER_LAYER("embedding", Embedding);

}  // namespace distrain
