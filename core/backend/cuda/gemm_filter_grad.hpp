// A convolution's kernel gradient as matrix products, for the shapes where cuDNN's
// deterministic float32 algorithms are slow (few input channels and many output positions,
// such as a first layer at a large batch). With col = im2col(x), (M positions, K =
// kh*kw*cin), the gradient is dW (K, cout) += col^T dy. M is cut into chunks whose col
// fits a bounded buffer, each chunk into slices of kSliceRows positions whose products
// cuBLAS computes side by side (one strided batch: the many-position sum is spread over
// the GPU), and the slices' products are added in slice order (deterministic column sums),
// so the result is the same on every run.
//
// CudnnConv2D times this against cuDNN's choice once per training batch size and keeps the
// faster; it holds a 64 MiB im2col chunk at most, beside its slices' products.
#pragma once
#include "core/backend/backend.hpp"
#include "core/backend/cuda/kernels.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

class CudaBackend;

class GemmFilterGrad {
 public:
  // Whether the sizes fit its 32-bit index arithmetic.
  static bool applies(const Conv2DSpec& spec, int64_t batch);

  GemmFilterGrad(CudaBackend& be, const Conv2DSpec& spec, int64_t batch);
  // dw (kh, kw, cin, cout) += the gradient for x (batch, h, w, cin) and dy (batch, oh, ow, cout).
  void accumulate(const float* x, const float* dy, float* dw);
  // Milliseconds one accumulate() takes on this GPU: the fastest of a few, after a warm-up,
  // on scratch inputs.
  double time_ms();

 private:
  static constexpr int64_t kSliceRows = 2048;

  CudaBackend& be_;
  cuda::ConvWindows windows_;
  int64_t positions_, k_, cout_, chunk_rows_;
  Buffer col_;       // (chunk_rows, K)
  Buffer partials_;  // (slices per chunk, K * cout)
};

}  // namespace distrain
