#include "core/layers/tensor_gather.hpp"

#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

class TensorGather final : public Layer {
 public:
  explicit TensorGather(const TensorPlace& place) : place_(place) {}
  std::string type() const override { return "tensor_gather"; }

  Shape setup(const Shape& in, ParamArena&) override {
    if (in.rank() != 1) fail(fmt::format("gathers flat features, got {}", in.str()));
    part_ = in[0];
    return Shape{part_ * place_.degree};
  }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    const int64_t n = in.shape[0];
    if (gathered_.empty() || gathered_.shape()[0] != n * place_.degree)
      gathered_ = Buffer(ctx.backend, Shape{n * place_.degree, part_});
    DT_CHECK(ctx.tensor, "layer '{}' has no tensor communicator", name());
    ctx.tensor->all_gather(in, gathered_.view());  // (degree, N, part), rank-major
    for (int r = 0; r < place_.degree; ++r)
      for (int64_t i = 0; i < n; ++i)
        ctx.backend.copy(gathered_.view().range((r * n + i) * part_, part_), out.range(i * part_ * place_.degree + r * part_, part_));
  }

  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (din.empty()) return;
    const int64_t n = din.shape[0];
    for (int64_t i = 0; i < n; ++i)
      ctx.backend.copy(dout.range(i * part_ * place_.degree + place_.rank * part_, part_), din.range(i * part_, part_));
  }

 private:
  TensorPlace place_;
  int64_t part_ = 0;
  Buffer gathered_;  // (degree * N, part)
};

}  // namespace

std::unique_ptr<Layer> make_tensor_gather(const TensorPlace& place) { return std::make_unique<TensorGather>(place); }

}  // namespace distrain
