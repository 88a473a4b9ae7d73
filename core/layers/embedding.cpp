// embedding: token ids (T,) int32 -> their vectors (T, output_dim), from a table
// (input_dim, output_dim) initialised N(0, 0.02) as GPT-2. An output head can be tied to
// the table (dense's tied_to), which then gets the gradient of both uses.
//
// Split by vocabulary (a row layer, layer.hpp): this rank holds rows [first, first + V_r)
// of the table; ids outside them give zeros, and the partial outputs are summed over the
// tensor group (reduce-scattered to this rank's positions under sequence parallelism).
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"
#include "core/layers/sequence_shard.hpp"

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
  bool can_split(TensorSplit split) const override { return split == TensorSplit::none || split == TensorSplit::row; }

  int64_t transient_bytes(int64_t n) const override {
    return sequence_ ? n * length_ * width_ * static_cast<int64_t>(dtype_size(kActivationDType)) : 0;
  }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 1) fail(fmt::format("expects token ids (sequence,), got {}", in.str()));
    int64_t weights = 0;
    if (__builtin_mul_overflow(vocabulary_, width_, &weights) || weights > kMaxExtent)
      fail(fmt::format("a table of {} x {} has too many weights", vocabulary_, width_));
    const TensorPlace& p = tensor_place();
    split_ = p.degree > 1 && p.split == TensorSplit::row;
    if (split_ && vocabulary_ < p.degree)
      fail(fmt::format("a vocabulary of {} does not split over a tensor degree of {}", vocabulary_, p.degree));
    const TensorSlice slice{split_ ? 0 : -1, p.rank, p.degree};
    table_ = arena.declare(name(), "embeddings", Shape{vocabulary_, width_}, Init::normal, vocabulary_, width_, true, slice);
    first_ = split_ ? slice_begin(vocabulary_, p.rank, p.degree) : 0;
    sequence_ = split_ && p.sequence;
    length_ = in[0];
    if (!sequence_) return Shape{in[0], width_};
    if (in[0] % p.degree != 0)
      fail(fmt::format("sequence_parallel: a sequence of {} does not split over a tensor degree of {}", in[0], p.degree));
    return Shape{in[0] / p.degree, width_};
  }

  // Its output is rows of the table (summed with zeros when split by vocabulary).
  bool reads_parameters_rounded(bool output_rounded) const override { return output_rounded; }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    if (!split_) return ctx.backend.embedding(table_.value(), in, out);
    if (!sequence_) {
      ctx.backend.embedding_slice(table_.value(), in, first_, out);
      return tensor_group(ctx).all_reduce(out, ReduceOp::sum);
    }
    Buffer partial(ctx.backend, Shape{in.shape[0], length_, width_});  // every position, this slice's rows
    ctx.backend.embedding_slice(table_.value(), in, first_, partial.view());
    reduce_scatter_sequence(ctx, tensor_group(ctx), partial.view(), out);
  }

  TensorTraffic tensor_traffic(bool) const override {
    using K = TensorCollective::Kind;
    if (!split_) return {};
    if (!sequence_) return {{{K::all_reduce, length_ * width_}}, {}};
    return {{{K::reduce_scatter, length_ * width_}}, {{K::all_gather, length_ * width_}}};
  }

  // The output gradient is whole on every rank (gathered from the shards first): each adds
  // its own rows' share.
  bool backward_reads_output() const override { return false; }
  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor) override {
    if (!split_) return ctx.backend.embedding_backward(in, dout, table_.grad());  // token ids have no gradient
    const WholeSequence whole(ctx, *this, dout, sequence_, length_);
    ctx.backend.embedding_slice_backward(in, first_, whole.view, table_.grad());
  }

 private:
  int64_t vocabulary_, width_;
  ParamRef table_;
  bool split_ = false, sequence_ = false;
  int64_t first_ = 0;   // the first token id of this rank's rows
  int64_t length_ = 0;  // the sequence's length
};

DT_REGISTER_LAYER("embedding", Embedding);

}  // namespace distrain
