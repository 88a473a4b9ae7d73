// global_avg_pool2d: Keras GlobalAveragePooling2D, (N, H, W, C) -> (N, C). Per channel: on
// a tensor-parallel slice of the channels its output is the slice of the features.
#include "core/layers/registry.hpp"

namespace distrain {

class GlobalAvgPool2D final : public Layer {
 public:
  explicit GlobalAvgPool2D(ConfigTable&) {}
  std::string type() const override { return "global_avg_pool2d"; }
  bool per_channel() const override { return true; }

  Shape setup(const Shape& in, ParamArena&) override {
    if (in.rank() != 3) fail(fmt::format("expects (height, width, channels) input, got {}", in.str()));
    // An average pool whose window is the whole image; (N, 1, 1, C) is laid out as (N, C).
    spec_ = Pool2DSpec{PoolKind::average, in[0], in[1], in[2], 1, 1, in[0], in[1], 1, 1, 0, 0, 0, 0};
    return Shape{in[2]};
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    if (!op_) op_ = ctx.backend.make_pool2d(spec_);
    op_->forward(in, out.reshaped(Shape{out.shape[0], 1, 1, out.shape[1]}), ctx.training);
  }

  void backward(Ctx&, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (!din.empty()) op_->backward(dout.reshaped(Shape{dout.shape[0], 1, 1, dout.shape[1]}), din);
  }

 private:
  Pool2DSpec spec_{};
  NotCopied<std::unique_ptr<Pool2DOp>> op_;
};

DT_REGISTER_LAYER("global_avg_pool2d", GlobalAvgPool2D);

}  // namespace distrain
