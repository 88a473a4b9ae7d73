// attention: causal multi-head self-attention as GPT-2's, on a sequence (T, C): one
// projection to queries, keys and values (C -> 3C), softmax(q k^T / sqrt(C/heads)) v per
// head over the positions up to each one, with dropout on the probabilities in training,
// then the output projection (C -> C). Llama's variant: `kv_heads` fewer key and value heads
// than query heads (grouped-query attention: the projection is C -> (H + 2 KV) D, query
// head h reading key and value head h mod KV), `rotary = true` turns queries and keys by
// their position (rope_theta, [rope_scaling]) after the projection, and `use_bias` /
// `qkv_bias` drop the projections' biases. The projections start N(0, 0.02), the output one
// scaled by 1/sqrt(residual projections in the model) as it writes into the residual
// stream. The scores are never held whole (flash attention: Backend::attention), so its
// memory grows as T, not T^2.
// Over a mesh's tensor axis it splits by heads (TensorSplit::heads, Megatron's attention):
// rank r of d holds, of each block of KV query heads and of the key and value blocks, the
// heads [r KV/d, (r+1) KV/d) (with KV = H: heads [r H/d, (r+1) H/d) of the query, key and
// value blocks), those columns of the first projection and those rows of the output one; the
// partial outputs are summed over the group, then the (whole) output bias added. With
// dropout, a rank draws its heads' masks as heads 0.. of its own (one_device's differ).
// With sequence parallelism its input and output are sequence shards: the input is
// all-gathered (again in backward), the partial outputs reduce-scattered.
// Under train.precision = "bf16" qkv is rounded to bf16 before the attention reads it (as
// a bf16 product's output would be), and the heads' output as the output projection reads
// it, so forward and backward see the same values; outside recomputed blocks
// (Layer::set_workspace_dtype) both are kept for backward at 2 bytes an element, with
// float32 copies only while a pass runs.
#include <algorithm>
#include <cmath>

#include "core/base/rng.hpp"
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"
#include "core/layers/rotary_angles.hpp"
#include "core/layers/sequence_shard.hpp"

namespace distrain {

class Attention final : public Layer {
 public:
  explicit Attention(ConfigTable& c)
      : heads_(c.get_int("heads")),
        kv_heads_(c.get_int("kv_heads", heads_)),
        rate_(static_cast<float>(c.get_float("dropout", 0.0))),
        has_proj_bias_(c.get_bool("use_bias", true)),
        has_qkv_bias_(c.get_bool("qkv_bias", has_proj_bias_)),
        requested_(parse_tensor_request(c.get_choice("tensor_parallel", "auto", {"auto", "heads", "replicated"}))) {
    if (heads_ <= 0) c.fail("heads", "must be positive");
    if (kv_heads_ <= 0 || heads_ % kv_heads_ != 0)
      c.fail("kv_heads", fmt::format("must divide heads = {} (1: multi-query attention)", heads_));
    if (rate_ < 0.0f || rate_ >= 1.0f) c.fail("dropout", "must be in [0, 1)");
    if (c.get_bool("rotary", false))
      rotary_ = RotarySpec::parse(c);
    else if (c.has("rope_theta") || c.has("rope_scaling"))
      c.fail(c.has("rope_theta") ? "rope_theta" : "rope_scaling", "applies with rotary = true");
  }

  std::string type() const override { return "attention"; }
  // GPT-2's keys, and Llama's where they differ from GPT-2's.
  Json settings() const override {
    Json j = {{"heads", heads_}, {"dropout", rate_}};
    if (kv_heads_ != heads_) j["kv_heads"] = kv_heads_;
    if (!has_proj_bias_) j["use_bias"] = false;
    if (has_qkv_bias_ != has_proj_bias_) j["qkv_bias"] = has_qkv_bias_;
    if (rotary_) {
      j["rotary"] = true;
      j.update(rotary_->settings());
    }
    return j;
  }
  bool can_split(TensorSplit split) const override { return split == TensorSplit::none || split == TensorSplit::heads; }
  std::optional<TensorSplit> requested_split() const override { return requested_; }
  int residual_projections() const override { return 1; }
  void set_residual_projections(int total) override { residual_stddev_ = 0.02 / std::sqrt(static_cast<double>(total)); }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 2) fail(fmt::format("expects a sequence (sequence, features), got {}", in.str()));
    sequence_ = tensor_place().sequence && tensor_place().degree > 1;
    t_ = sequence_ ? in[0] * tensor_place().degree : in[0];
    c_ = in[1];
    if (c_ % heads_ != 0) fail(fmt::format("width {} does not split into {} heads", c_, heads_));
    head_dim_ = c_ / heads_;
    if (rotary_ && head_dim_ % 2 != 0) fail(fmt::format("rotary positions need an even head width, got {}", head_dim_));
    const TensorPlace& p = tensor_place();
    split_ = p.split == TensorSplit::heads && p.degree > 1;
    const int degree = split_ ? p.degree : 1;
    if (kv_heads_ % degree != 0)
      fail(kv_heads_ == heads_
               ? fmt::format("heads = {} do not split over a tensor degree of {}: use a degree that divides them",
                             heads_, degree)
               : fmt::format("kv_heads = {} do not split over a tensor degree of {}: use a degree that divides them "
                             "(heads = {})",
                             kv_heads_, degree, heads_));
    local_heads_ = heads_ / degree;
    local_kv_heads_ = kv_heads_ / degree;
    local_c_ = local_heads_ * head_dim_;
    qkv_width_ = (local_heads_ + 2 * local_kv_heads_) * head_dim_;
    // Blocks of KV heads' columns: H/KV of queries, one of keys, one of values, each cut by rank.
    const int blocks = static_cast<int>(heads_ / kv_heads_);
    const TensorSlice by_heads{split_ ? 1 : -1, p.rank, degree, blocks + 2},
        bias_by_heads{split_ ? 0 : -1, p.rank, degree, blocks + 2}, proj_rows{split_ ? 0 : -1, p.rank, degree, blocks};
    const int64_t full_width = (heads_ + 2 * kv_heads_) * head_dim_;
    qkv_kernel_ = arena.declare(name(), "qkv_kernel", Shape{c_, full_width}, Init::normal, c_, full_width, true, by_heads);
    if (has_qkv_bias_) qkv_bias_ = arena.declare(name(), "qkv_bias", Shape{full_width}, Init::zeros, 0, 0, true, bias_by_heads);
    proj_kernel_ = arena.declare(name(), "proj_kernel", Shape{c_, c_}, Init::normal, c_, c_, true, proj_rows, residual_stddev_);
    if (has_proj_bias_) proj_bias_ = arena.declare(name(), "proj_bias", Shape{c_}, Init::zeros, 0, 0, true);
    return in;
  }

  // The projections in and out, then for each query the scores against the keys up to it
  // and the sum of their values (causal: t(t + 1)/2 pairs of each).
  double forward_flops() const override {
    const double t = static_cast<double>(t_), pairs = t * (t + 1) / 2;
    return 2.0 * t * c_ * qkv_width_ + 2.0 * t * local_c_ * c_ + 4.0 * pairs * local_c_;
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    const int64_t n = in.shape[0];
    ensure_workspace(ctx.backend, n);
    const PassCopies pass = PassCopies::to_write(ctx.backend, qkv_, mixed_);
    const Tensor qkv = pass.qkv, mixed = pass.mixed;
    const WholeSequence x(ctx, *this, in, sequence_, t_);
    matmul(ctx, false, false, x.view.rows(c_), qkv_kernel_.value(), 0.0f, qkv.rows(qkv_width_));
    // Rounded as the bias is added, or after the rotation where there is one or no bias.
    const bool round_after = rotary_ || !has_qkv_bias_;
    if (has_qkv_bias_) ctx.backend.add_bias(qkv, qkv_bias_.value(), round_after ? OutputRounding{} : rounding_for(qkv_));
    if (rotary_) ctx.backend.rotary(qkv, local_heads_, local_kv_heads_, angles(ctx.backend), false);
    if (round_after) round_and_keep(ctx, qkv, qkv_);
    // The kernels read qkv as it is kept: the same rounded values, bf16 where kept so.
    ctx.backend.attention(qkv_.view(), local_heads_, local_kv_heads_, matmul_dtype(), training_rate(ctx), seed(ctx),
                          mixed, lse_.view());
    round_and_keep(ctx, mixed, mixed_);
    if (sequence_) {  // each rank's heads' share, summed into this rank's positions
      Buffer partial(ctx.backend, Shape{n, t_, c_});
      matmul(ctx, false, false, mixed.rows(local_c_), proj_kernel_.value(), 0.0f, partial.view().rows(c_));
      reduce_scatter_sequence(ctx, tensor_group(ctx), partial.view(), out);
    } else {
      matmul(ctx, false, false, mixed.rows(local_c_), proj_kernel_.value(), 0.0f, out.rows(c_));
      if (split_) tensor_group(ctx).all_reduce(out, ReduceOp::sum);  // each rank's heads' share
    }
    if (has_proj_bias_)
      ctx.backend.add_bias(out, proj_bias_.value(), ctx.output_rounding);
    else if (ctx.output_rounding.round)
      ctx.backend.to_bf16(out, ctx.output_rounding.packed);
  }
  bool rounds_output() const override { return true; }  // with the output bias

  bool backward_reads_output() const override { return false; }  // it keeps the heads' output
  // Its input feeds the qkv product only; sequence shards gather it first (float32 there).
  bool reads_inputs_as_products() const override { return !sequence_; }
  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor din) override {
    const PassCopies pass = PassCopies::to_read(ctx.backend, qkv_, mixed_);
    const Tensor qkv = pass.qkv, mixed = pass.mixed;
    const Buffer dqkv_buffer(ctx.backend, qkv.shape), dmixed_buffer(ctx.backend, mixed.shape);  // this pass's only
    const Tensor dqkv = dqkv_buffer.view(), dmixed = dmixed_buffer.view();
    const WholeSequence dy_whole(ctx, *this, dout, sequence_, t_);
    if (has_proj_bias_) ctx.backend.bias_grad(dy_whole.view.rows(c_), proj_bias_.grad());
    {
      Buffer rounded;
      const Tensor dy = shared_operand(ctx, dy_whole.view.rows(c_), rounded, true);
      matmul(ctx, true, false, mixed.rows(local_c_), dy, 1.0f, proj_kernel_.grad());
      matmul(ctx, false, true, dy, proj_kernel_.value(), 0.0f, dmixed.rows(local_c_));
    }
    ctx.backend.attention_backward(qkv, mixed, lse_.view(), dmixed, local_heads_, local_kv_heads_, matmul_dtype(),
                                   training_rate(ctx), seed(ctx), dqkv);
    if (rotary_) ctx.backend.rotary(dqkv, local_heads_, local_kv_heads_, angles(ctx.backend), true);
    if (has_qkv_bias_) ctx.backend.bias_grad(dqkv.rows(qkv_width_), qkv_bias_.grad());
    Buffer rounded;
    const Tensor g = shared_operand(ctx, dqkv.rows(qkv_width_), rounded, !din.empty());
    const WholeSequence x(ctx, *this, in, sequence_, t_);
    matmul(ctx, true, false, x.view.rows(c_), g, 1.0f, qkv_kernel_.grad());
    if (din.empty()) return;
    if (sequence_) {
      Buffer partial(ctx.backend, Shape{in.shape[0], t_, c_});
      matmul(ctx, false, true, g, qkv_kernel_.value(), 0.0f, partial.view().rows(c_));
      reduce_scatter_sequence(ctx, tensor_group(ctx), partial.view(), din);
      return;
    }
    matmul(ctx, false, true, g, qkv_kernel_.value(), 0.0f, din.rows(c_));
    if (split_) tensor_group(ctx).all_reduce(din, ReduceOp::sum);  // each rank's heads' share
  }

  TensorTraffic tensor_traffic(bool input_gradient) const override {
    return paired_split_traffic(sequence_, split_, t_ * c_, input_gradient);
  }

  // Backward holds the gradients of qkv and of the heads' output (3C + C per token), under
  // bf16 also a float32 copy of the heads' output (forward's copies of both, 4C, are
  // fewer) and one of the rounded gradients the products share;
  // on sequence shards also the whole output gradient, the whole input and the partial
  // input gradient. On top, one of: the operand copies of
  // the largest product (bf16), the bf16 copies of qkv and of the output gradient the
  // attention kernels read (bf16), or, on sequence shards, the reordered copy a gather or
  // reduce-scatter makes: they never run at once.
  int64_t transient_bytes(int64_t n) const override {
    const auto element = static_cast<int64_t>(dtype_size(kActivationDType));
    const int64_t products =
        std::max(linear_scratch_bytes(n * t_, c_, qkv_width_), linear_scratch_bytes(n * t_, local_c_, c_));
    const int64_t attention_operands = matmul_dtype() == DType::bf16 ? 2 * (qkv_width_ + local_c_) * n * t_ : 0;
    const int64_t rounded_gradient = std::max(shared_operand_bytes(n * t_, c_), shared_operand_bytes(n * t_, qkv_width_));
    const int64_t per_token = qkv_width_ + local_c_ + (workspace_dtype() == DType::bf16 ? local_c_ : 0);
    const int64_t whole = sequence_ ? n * t_ * c_ * element : 0;
    return per_token * n * t_ * element + 3 * whole + rounded_gradient + std::max({products, attention_operands, whole});
  }

  // qkv ((H + 2 KV) D) and the heads' output (H D) per token, in bf16 under that precision,
  // and a log-sum-exp per head and token in float32; of this rank's heads when split.
  int64_t workspace_bytes(int64_t n) const override {
    return n * t_ *
           ((qkv_width_ + local_c_) * static_cast<int64_t>(dtype_size(workspace_dtype())) +
            local_heads_ * static_cast<int64_t>(dtype_size(kActivationDType)));
  }

  void release_workspace() override {
    for (Buffer* b : std::initializer_list<Buffer*>{&qkv_, &mixed_, &lse_, &angles_}) *b = Buffer();
  }

 private:
  float training_rate(const Ctx& ctx) const { return ctx.training ? rate_ : 0.0f; }
  uint64_t seed(const Ctx& ctx) const { return derive_seed(ctx.step_seed, static_cast<uint64_t>(index())); }

  // The rotation's cosines and sines for this layer's sequence, made once on its device.
  Tensor angles(Backend& backend) {
    if (angles_.empty()) {
      angles_ = Buffer(backend, Shape{2, t_, head_dim_ / 2});
      backend.upload(rotary_angles(*rotary_, t_, head_dim_).data(), angles_.view());
    }
    return angles_.view();
  }

  void ensure_workspace(Backend& backend, int64_t n) {
    if (!qkv_.empty() && qkv_.shape()[0] == n && qkv_.view().dtype == workspace_dtype()) return;
    qkv_ = Buffer(backend, Shape{n, t_, qkv_width_}, workspace_dtype());
    mixed_ = Buffer(backend, Shape{n, t_, local_c_}, workspace_dtype());
    lse_ = Buffer(backend, Shape{n, local_heads_, t_});
  }

  // The qkv and heads' output a pass works on: the kept buffers themselves, or where those
  // are bf16, float32 copies for this pass only: forward's to be written and then kept
  // (round_and_keep); backward's heads' output unpacked from the kept one.
  struct PassCopies {
    Buffer qkv_copy, mixed_copy;
    Tensor qkv, mixed;

    static PassCopies to_write(Backend& backend, const Buffer& kept_qkv, const Buffer& kept_mixed) {
      PassCopies pass;
      pass.qkv = kept_qkv.view();
      pass.mixed = kept_mixed.view();
      if (kept_qkv.view().dtype != DType::bf16) return pass;
      pass.qkv_copy = Buffer(backend, kept_qkv.shape());
      pass.mixed_copy = Buffer(backend, kept_mixed.shape());
      pass.qkv = pass.qkv_copy.view();
      pass.mixed = pass.mixed_copy.view();
      return pass;
    }
    // The attention kernels read qkv as it is kept, bf16 too: only the heads' output is
    // unpacked.
    static PassCopies to_read(Backend& backend, const Buffer& kept_qkv, const Buffer& kept_mixed) {
      PassCopies pass;
      pass.qkv = kept_qkv.view();
      pass.mixed = kept_mixed.view();
      if (kept_mixed.view().dtype != DType::bf16) return pass;
      pass.mixed_copy = Buffer(backend, kept_mixed.shape());
      pass.mixed = pass.mixed_copy.view();
      backend.from_bf16(kept_mixed.view(), pass.mixed);
      return pass;
    }
  };

  // Under bf16 products values are rounded to bf16, as a bf16 product's output would be
  // (inside a recomputed block too, so that its rerun is bitwise the same), and packed
  // into `kept` where that is bf16: by the op that writes them (rounding_for) or after
  // (round_and_keep).
  OutputRounding rounding_for(const Buffer& kept) const {
    if (matmul_dtype() != DType::bf16) return {};
    return {true, kept.view().dtype == DType::bf16 ? kept.view() : Tensor{}};
  }
  void round_and_keep(Ctx& ctx, const Tensor& values, const Buffer& kept) const {
    const OutputRounding rounding = rounding_for(kept);
    if (rounding.round) ctx.backend.to_bf16(values, rounding.packed);
  }

  int64_t heads_, kv_heads_;
  float rate_;
  bool has_proj_bias_, has_qkv_bias_;
  std::optional<RotarySpec> rotary_;
  std::optional<TensorSplit> requested_;  // tensor_parallel; none: "replicated"
  double residual_stddev_ = 0.02;
  int64_t t_ = 0, c_ = 0;
  bool split_ = false;                        // by heads over the tensor axis
  bool sequence_ = false;                     // input and output are sequence shards
  int64_t head_dim_ = 0;
  int64_t local_heads_ = 0, local_kv_heads_ = 0, local_c_ = 0;  // this rank's heads, key/value heads, heads' width
  int64_t qkv_width_ = 0;                                        // this rank's (H + 2 KV) D
  ParamRef qkv_kernel_, qkv_bias_, proj_kernel_, proj_bias_;
  NotCopied<Buffer> qkv_, mixed_, lse_;  // for a batch of n, from the last forward
  NotCopied<Buffer> angles_;             // (2, T, D/2) where rotary
};

DT_REGISTER_LAYER("attention", Attention);

}  // namespace distrain
