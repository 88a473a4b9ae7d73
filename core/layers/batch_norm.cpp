// batch_norm: Keras BatchNormalization over the last (channel) axis.
// Training normalises with the batch statistics and updates the moving ones
// (moving = moving * momentum + batch * (1 - momentum)); inference uses the moving ones.
// gamma (scale) and beta (center) are trainable; moving_mean/moving_variance are state.
// Statistics are per channel, so on a slice of the channels (TensorSplit::sliced, between
// a column- and a row-parallel conv) it needs nothing from the other ranks: each holds the
// slice of every variable, as checkpoints see it whole.
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

class BatchNorm final : public Layer {
 public:
  explicit BatchNorm(ConfigTable& c)
      : momentum_(static_cast<float>(c.get_float("momentum", 0.99))),
        epsilon_(static_cast<float>(c.get_float("epsilon", 1e-3))),
        center_(c.get_bool("center", true)),
        scale_(c.get_bool("scale", true)) {
    if (momentum_ < 0.0f || momentum_ > 1.0f) c.fail("momentum", "must be in [0, 1]");
    if (epsilon_ <= 0.0f) c.fail("epsilon", "must be positive");
  }

  std::string type() const override { return "batch_norm"; }
  Json settings() const override {
    return {{"momentum", momentum_}, {"epsilon", epsilon_}, {"center", center_}, {"scale", scale_}};
  }
  bool per_channel() const override { return true; }

  Shape setup(const Shape& in, ParamArena& arena) override {
    if (in.rank() != 1 && in.rank() != 3) fail(fmt::format("expects (features,) or (h, w, c) input, got {}", in.str()));
    channels_ = in[in.rank() - 1];
    const TensorPlace& p = tensor_place();
    const bool sliced = p.split == TensorSplit::sliced && p.degree > 1;
    const Shape c{sliced ? channels_ * p.degree : channels_};  // the whole variables'
    const TensorSlice slice{sliced ? 0 : -1, p.rank, p.degree};
    if (scale_) gamma_ = arena.declare(name(), "gamma", c, Init::ones, 0, 0, true, slice);
    if (center_) beta_ = arena.declare(name(), "beta", c, Init::zeros, 0, 0, true, slice);
    moving_mean_ = arena.declare(name(), "moving_mean", c, Init::zeros, 0, 0, false, slice);
    moving_var_ = arena.declare(name(), "moving_variance", c, Init::ones, 0, 0, false, slice);
    return in;
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    prepare(ctx.backend);
    if (!ctx.training) {
      op_->forward_inference(in, gamma(), beta(), moving_mean_.value(), moving_var_.value(), out);
      return;
    }
    op_->forward_training(in, gamma(), beta(), out, batch_mean_.view(), batch_var_.view(), ctx.cross_replica_sum);
    ctx.backend.axpby(1.0f - momentum_, batch_mean_.view(), momentum_, moving_mean_.value());
    ctx.backend.axpby(1.0f - momentum_, batch_var_.view(), momentum_, moving_var_.value());
  }

  void backward(Ctx& ctx, const Tensor& in, const Tensor&, Tensor dout, Tensor din) override {
    // oneDNN and cuDNN always produce dx; when the caller needs none it goes to scratch.
    if (din.empty()) {
      if (dx_scratch_.shape() != in.shape) dx_scratch_ = Buffer(ctx.backend, in.shape);
      din = dx_scratch_.view();
    }
    // Outside training (a frozen layer) the forward used the moving statistics.
    const bool fixed = !ctx.training;
    op_->backward(in, dout, gamma(), fixed ? moving_mean_.value() : batch_mean_.view(),
                  fixed ? moving_var_.value() : batch_var_.view(), fixed, din,
                  scale_ ? gamma_.grad() : unused_grad_.view(), center_ ? beta_.grad() : unused_grad_.view(),
                  ctx.cross_replica_sum);
  }

 private:
  // Constant gamma = 1 / beta = 0 stand in for the disabled ones; their gradients are dropped.
  Tensor gamma() const { return scale_ ? gamma_.value() : ones_.view(); }
  Tensor beta() const { return center_ ? beta_.value() : zeros_.view(); }

  void prepare(Backend& be) {
    if (op_) return;
    op_ = be.make_batch_norm(channels_, epsilon_);
    const Shape c{channels_};
    batch_mean_ = Buffer(be, c);
    batch_var_ = Buffer(be, c);
    ones_ = Buffer(be, c);
    zeros_ = Buffer(be, c);
    unused_grad_ = Buffer(be, c);
    be.fill(ones_.view(), 1.0f);
    be.fill(zeros_.view(), 0.0f);
    be.fill(batch_mean_.view(), 0.0f);
    be.fill(batch_var_.view(), 1.0f);
  }

  float momentum_, epsilon_;
  bool center_, scale_;
  int64_t channels_ = 0;
  ParamRef gamma_, beta_, moving_mean_, moving_var_;
  NotCopied<std::unique_ptr<BatchNormOp>> op_;
  NotCopied<Buffer> batch_mean_, batch_var_, ones_, zeros_, unused_grad_, dx_scratch_;
};

DT_REGISTER_LAYER("batch_norm", BatchNorm);

}  // namespace distrain
