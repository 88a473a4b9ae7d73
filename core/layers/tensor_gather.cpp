#include "core/layers/tensor_gather.hpp"

#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

// A "row" below is one position of the leading axes (an example, or a pixel of one): its
// `part_` channels on each rank, `part_ * degree` once gathered.
class TensorGather final : public Layer {
 public:
  explicit TensorGather(const TensorPlace& place) : place_(place) {}
  std::string type() const override { return "tensor_gather"; }

  Shape setup(const Shape& in, ParamArena&) override {
    if (in.rank() < 1) fail(fmt::format("gathers the last axis, got {}", in.str()));
    part_ = in[in.rank() - 1];
    std::vector<int64_t> dims = in.dims();
    dims.back() = part_ * place_.degree;
    whole_ = in.numel() * place_.degree;
    return Shape(std::move(dims));
  }
  TensorTraffic tensor_traffic(bool) const override { return {{{TensorCollective::Kind::all_gather, whole_}}, {}}; }

  void forward(Ctx& ctx, const Tensor& in, Tensor out) override {
    const int64_t rows = in.numel() / part_;
    if (gathered_.empty() || gathered_.shape()[0] != rows * place_.degree)
      gathered_ = Buffer(ctx.backend, Shape{rows * place_.degree, part_});
    tensor_group(ctx).all_gather(in, gathered_.view());  // (degree, rows, part), rank-major
    const int64_t whole = part_ * place_.degree;
    for (int r = 0; r < place_.degree; ++r)
      for (int64_t i = 0; i < rows; ++i)
        ctx.backend.copy(gathered_.view().range((r * rows + i) * part_, part_), out.range(i * whole + r * part_, part_));
  }

  void backward(Ctx& ctx, const Tensor&, const Tensor&, Tensor dout, Tensor din) override {
    if (din.empty()) return;
    const int64_t rows = din.numel() / part_, whole = part_ * place_.degree;
    for (int64_t i = 0; i < rows; ++i)
      ctx.backend.copy(dout.range(i * whole + place_.rank * part_, part_), din.range(i * part_, part_));
  }

 private:
  TensorPlace place_;
  int64_t part_ = 0;
  int64_t whole_ = 0;  // elements of one example's gathered output
  Buffer gathered_;  // (degree * rows, part)
};

}  // namespace

std::unique_ptr<Layer> make_tensor_gather(const TensorPlace& place) { return std::make_unique<TensorGather>(place); }

}  // namespace distrain
