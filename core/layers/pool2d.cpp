// max_pool2d / avg_pool2d: Keras MaxPooling2D / AveragePooling2D. strides default to
// pool_size; padded cells never count (TensorFlow semantics). Per channel: runs on a
// tensor-parallel slice of the channels as on all of them.
#include "core/layers/padding.hpp"
#include "core/base/json.hpp"
#include "core/layers/registry.hpp"

namespace distrain {

class Pool2D : public Layer {
 public:
  Pool2D(ConfigTable& c, PoolKind kind)
      : kind_(kind),
        pool_(c.get_pair("pool_size", std::array<int64_t, 2>{2, 2})),
        strides_(c.get_pair("strides", pool_)),
        same_(c.get_choice("padding", "valid", {"valid", "same"}) == "same") {
    for (const int64_t p : pool_)
      if (p <= 0 || p > kMaxWindow) c.fail("pool_size", fmt::format("must be in [1, {}]", kMaxWindow));
    for (const int64_t s : strides_)
      if (s <= 0 || s > kMaxWindow) c.fail("strides", fmt::format("must be in [1, {}]", kMaxWindow));
  }

  bool per_channel() const override { return true; }
  Json settings() const override { return {{"pool_size", pool_}, {"strides", strides_}, {"padding", same_ ? "same" : "valid"}}; }

  Shape setup(const Shape& in, ParamArena&) override {
    if (in.rank() != 3) fail(fmt::format("expects (height, width, channels) input, got {}", in.str()));
    const Padding1D ph = pad_1d(in[0], pool_[0], strides_[0], same_);
    const Padding1D pw = pad_1d(in[1], pool_[1], strides_[1], same_);
    if (ph.out <= 0 || pw.out <= 0)
      fail(fmt::format("pool {}x{} does not fit input {} with padding \"valid\"", pool_[0], pool_[1], in.str()));
    spec_ = Pool2DSpec{kind_,       in[0],       in[1],     in[2],     ph.out,   pw.out,  pool_[0],
                       pool_[1],    strides_[0], strides_[1], ph.before, ph.after, pw.before, pw.after};
    return Shape{ph.out, pw.out, in[2]};
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    if (!op_) op_ = ctx.backend.make_pool2d(spec_);
    op_->forward(in, out, ctx.training);
  }

  void backward(Ctx&, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) op_->backward(dout, din);
  }

 private:
  PoolKind kind_;
  std::array<int64_t, 2> pool_, strides_;
  bool same_;
  Pool2DSpec spec_{};
  NotCopied<std::unique_ptr<Pool2DOp>> op_;
};

class MaxPool2D final : public Pool2D {
 public:
  explicit MaxPool2D(ConfigTable& c) : Pool2D(c, PoolKind::max) {}
  std::string type() const override { return "max_pool2d"; }
};

class AvgPool2D final : public Pool2D {
 public:
  explicit AvgPool2D(ConfigTable& c) : Pool2D(c, PoolKind::average) {}
  std::string type() const override { return "avg_pool2d"; }
};

DT_REGISTER_LAYER("max_pool2d", MaxPool2D);
DT_REGISTER_LAYER("avg_pool2d", AvgPool2D);

}  // namespace distrain
