// Pooling on the GPU: own kernels (pool_kernels.cu) rather than cuDNN's, which pools with
// symmetric padding only and so cannot do TensorFlow's "same".
#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/cuda/kernels.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

class CudaPool2D final : public Pool2DOp {
 public:
  CudaPool2D(CudaBackend& be, const Pool2DSpec& s)
      : be_(be),
        g_{s.in_h, s.in_w, s.channels, s.out_h, s.out_w, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_top,
           s.pad_left, s.kind == PoolKind::max} {}

  void forward(const Tensor& x, Tensor y, bool training) override {
    auto lock = be_.enter();
    const bool record = training && g_.max;
    if (record && argmax_.shape() != y.shape) argmax_ = Buffer(be_, y.shape, DType::i32);
    recorded_ = record ? y.numel() : -1;
    cuda::pool_forward(g_, x.f32(), y.f32(), record ? argmax_.view().i32() : nullptr, x.shape[0], be_.stream());
  }

  void backward(const Tensor& dy, Tensor dx) override {
    auto lock = be_.enter();
    DT_CHECK(!g_.max || recorded_ == dy.numel(), "max-pool backward without a training forward of the same batch");
    cuda::pool_backward(g_, dy.f32(), g_.max ? argmax_.view().i32() : nullptr, dx.f32(), dx.shape[0], be_.stream());
  }

 private:
  CudaBackend& be_;
  cuda::PoolGeometry g_;
  Buffer argmax_;  // per output element: the input cell (n, h, w) that won
  int64_t recorded_ = -1;
};

}  // namespace

std::unique_ptr<Pool2DOp> CudaBackend::make_pool2d(const Pool2DSpec& spec) {
  return std::make_unique<CudaPool2D>(*this, spec);
}

}  // namespace distrain
