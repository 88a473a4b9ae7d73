// position_embedding: adds a learned vector per position to a sequence (T, C) from a table
// (max_length, C) initialised N(0, 0.02) as GPT-2's; positions past T are kept, unused,
// so that a table of GPT-2's 1,024 rows trains on shorter windows. Under sequence
// parallelism it runs on a shard of the positions (rank r's T/d from r T/d on), adding
// those rows; its gradient is then each rank's rows' share (summed over the tensor axis).
#include "core/layers/registry.hpp"

namespace distrain {

class PositionEmbedding final : public Layer {
 public:
  explicit PositionEmbedding(ConfigTable& c) : max_length_(c.get_int("max_length", 0)) {
    if (max_length_ < 0 || (max_length_ == 0 && c.has("max_length")))
      c.fail("max_length", "must be positive: the positions the table holds (leave it out for the sequence length)");
  }
  std::string type() const override { return "position_embedding"; }
  bool per_position() const override { return true; }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 2) fail(fmt::format("expects a sequence (sequence, features), got {}", in.str()));
    const TensorPlace& p = tensor_place();
    const int64_t length = p.sequence ? in[0] * p.degree : in[0];
    first_ = p.sequence ? in[0] * p.rank : 0;
    const int64_t rows = max_length_ ? max_length_ : length;
    if (rows < length) fail(fmt::format("max_length {} is shorter than the sequence ({})", rows, length));
    if (rows > kMaxExtent / in[1]) fail(fmt::format("a table of {} x {} has too many weights", rows, in[1]));
    table_ = arena.declare(name(), "embeddings", Shape{rows, in[1]}, Init::normal, rows, in[1], true);
    return in;
  }

  // Seen as (N, T*C), the table's rows of the positions held are a bias over each example.
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    ctx.backend.copy(in, out);
    ctx.backend.add_bias(flat(out), used_rows(table_.value(), out), ctx.output_rounding);
  }
  bool rounds_output() const override { return true; }

  bool backward_reads_inputs() const override { return false; }
  bool backward_reads_output() const override { return false; }
  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    ctx.backend.bias_grad(flat(dout), used_rows(table_.grad(), dout));
    if (!din.empty()) ctx.backend.copy(dout, din);
  }

 private:
  static Tensor flat(const Tensor& t) { return t.rows(t.numel() / t.shape[0]); }
  // The table's T*C values from row first_ on, T*C being one example of `batch`.
  Tensor used_rows(const Tensor& table, const Tensor& batch) const {
    const int64_t example = batch.numel() / batch.shape[0];
    return table.range(first_ * (example / batch.shape[1]), example);
  }
  int64_t max_length_;
  int64_t first_ = 0;  // the first position held (a sequence shard's)
  ParamRef table_;
};

DT_REGISTER_LAYER("position_embedding", PositionEmbedding);

}  // namespace distrain
