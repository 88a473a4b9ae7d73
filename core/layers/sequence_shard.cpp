#include "core/layers/sequence_shard.hpp"

#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

// (N, T, C) as N examples of d blocks of `block` = T/d x C elements.
struct Blocks {
  int64_t examples, block;
};

Blocks blocks_of(const Tensor& whole, int degree) {
  DT_CHECK(whole.shape.rank() >= 2 && whole.shape[1] % degree == 0, "sequence of {} over {} ranks", whole.shape.str(), degree);
  return Blocks{whole.shape[0], whole.numel() / whole.shape[0] / degree};
}

}  // namespace

void gather_sequence(Ctx& ctx, Communicator& group, const Tensor& shard, Tensor whole) {
  const int d = group.size();
  const Blocks b = blocks_of(whole, d);
  Buffer ranked(ctx.backend, Shape{whole.numel()});  // (d, N, T/d, C): what all_gather lays out
  group.all_gather(shard, ranked.view());
  for (int r = 0; r < d; ++r)
    for (int64_t n = 0; n < b.examples; ++n)
      ctx.backend.copy(ranked.view().range((r * b.examples + n) * b.block, b.block), whole.range((n * d + r) * b.block, b.block));
}

void reduce_scatter_sequence(Ctx& ctx, Communicator& group, const Tensor& whole, Tensor shard) {
  const int d = group.size();
  const Blocks b = blocks_of(whole, d);
  Buffer ranked(ctx.backend, Shape{whole.numel()});
  for (int r = 0; r < d; ++r)
    for (int64_t n = 0; n < b.examples; ++n)
      ctx.backend.copy(whole.range((n * d + r) * b.block, b.block), ranked.view().range((r * b.examples + n) * b.block, b.block));
  group.reduce_scatter(ranked.view(), shard, ReduceOp::sum);
}

WholeSequence::WholeSequence(Ctx& ctx, const Layer& layer, const Tensor& t, bool sharded, int64_t whole_length) : view(t) {
  if (!sharded) return;
  DT_CHECK(ctx.tensor, "layer '{}' runs on sequence shards but has no tensor communicator", layer.name());
  std::vector<int64_t> dims = t.shape.dims();
  dims[1] = whole_length;
  gathered = Buffer(ctx.backend, Shape(std::move(dims)));
  gather_sequence(ctx, *ctx.tensor, t, gathered.view());
  view = gathered.view();
}

namespace {

// Copies this rank's positions of whole (N, T, C) into shard (N, T/d, C).
void take_shard(Ctx& ctx, const TensorPlace& place, const Tensor& whole, Tensor shard) {
  const Blocks b = blocks_of(whole, place.degree);
  for (int64_t n = 0; n < b.examples; ++n)
    ctx.backend.copy(whole.range((n * place.degree + place.rank) * b.block, b.block), shard.range(n * b.block, b.block));
}

// A layer that moves a sequence between shards and the whole; while it runs it holds a
// whole sequence (all_gather's or the reorder's buffer).
class SequenceReshard : public Layer {
 public:
  explicit SequenceReshard(const TensorPlace& place) : place_(place) {}
  int64_t transient_bytes(int64_t n) const override { return n * whole_ * static_cast<int64_t>(dtype_size(kActivationDType)); }

 protected:
  TensorPlace place_;
  int64_t whole_ = 0;  // elements of one example's whole sequence
};

class SequenceScatter final : public SequenceReshard {
 public:
  using SequenceReshard::SequenceReshard;
  std::string type() const override { return "sequence_scatter"; }
  Shape setup(const Shape& in, ParamArena&) override {
    if (in.rank() != 2) fail(fmt::format("sequence_parallel shards a sequence (sequence, features), got {}", in.str()));
    if (in[0] % place_.degree != 0)
      fail(fmt::format("sequence_parallel: a sequence of {} positions does not split over the tensor degree {}", in[0],
                       place_.degree));
    whole_ = in.numel();
    return Shape{in[0] / place_.degree, in[1]};
  }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { take_shard(ctx, place_, in, out); }
  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) gather_sequence(ctx, tensor_group(ctx), dout, din);
  }
  TensorTraffic tensor_traffic(bool input_gradient) const override {
    TensorTraffic t;
    if (input_gradient) t.backward.push_back({TensorCollective::Kind::all_gather, whole_});
    return t;
  }
};

class SequenceGather final : public SequenceReshard {
 public:
  using SequenceReshard::SequenceReshard;
  std::string type() const override { return "sequence_gather"; }
  Shape setup(const Shape& in, ParamArena&) override {
    if (in.rank() != 2) fail(fmt::format("gathers a sequence (sequence, features), got {}", in.str()));
    whole_ = in.numel() * place_.degree;
    return Shape{in[0] * place_.degree, in[1]};
  }
  void forward(Ctx& ctx, const Tensor& in, Tensor out) override { gather_sequence(ctx, tensor_group(ctx), in, out); }
  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) take_shard(ctx, place_, dout, din);
  }
  TensorTraffic tensor_traffic(bool) const override { return {{{TensorCollective::Kind::all_gather, whole_}}, {}}; }
};

}  // namespace

std::unique_ptr<Layer> make_sequence_scatter(const TensorPlace& place) { return std::make_unique<SequenceScatter>(place); }
std::unique_ptr<Layer> make_sequence_gather(const TensorPlace& place) { return std::make_unique<SequenceGather>(place); }

TensorTraffic paired_split_traffic(bool sequence, bool split, int64_t whole, bool input_gradient) {
  using K = TensorCollective::Kind;
  TensorTraffic t;
  if (sequence) {
    t.forward = {{K::all_gather, whole}, {K::reduce_scatter, whole}};
    t.backward = {{K::all_gather, whole}, {K::all_gather, whole}};
    if (input_gradient) t.backward.push_back({K::reduce_scatter, whole});
  } else if (split) {
    t.forward.push_back({K::all_reduce, whole});
    if (input_gradient) t.backward.push_back({K::all_reduce, whole});
  }
  return t;
}

}  // namespace distrain
