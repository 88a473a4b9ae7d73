// Layout helpers around cuDNN's convolution: kernel transposes and explicit padding.
#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"

namespace distrain::cuda {

namespace {

__global__ void hwio_to_ohwi_kernel(const float* w, float* o, int64_t khw, int64_t cin, int64_t cout) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= khw * cin * cout) return;
  const int64_t co = i % cout, ci = i / cout % cin, s = i / (cout * cin);
  o[(co * khw + s) * cin + ci] = w[i];
}

__global__ void add_ohwi_to_hwio_kernel(const float* o, float* w, int64_t khw, int64_t cin, int64_t cout) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= khw * cin * cout) return;
  const int64_t co = i % cout, ci = i / cout % cin, s = i / (cout * cin);
  w[i] += o[(co * khw + s) * cin + ci];
}

__global__ void pad_kernel(const float* x, float* xp, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top,
                           int64_t left, int64_t ph, int64_t pw) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * ph * pw * c) return;
  const int64_t k = i % c, col = i / c % pw, row = i / (c * pw) % ph, b = i / (c * pw * ph);
  const int64_t r = row - top, q = col - left;
  xp[i] = (r >= 0 && r < h && q >= 0 && q < w) ? x[((b * h + r) * w + q) * c + k] : 0.0f;
}

__global__ void crop_kernel(const float* dxp, float* dx, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top,
                            int64_t left, int64_t ph, int64_t pw) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * h * w * c) return;
  const int64_t k = i % c, q = i / c % w, r = i / (c * w) % h, b = i / (c * w * h);
  dx[i] = dxp[((b * ph + r + top) * pw + q + left) * c + k];
}

}  // namespace

void hwio_to_ohwi(const float* w, float* o, int64_t khw, int64_t cin, int64_t cout, cudaStream_t s) {
  const int64_t n = khw * cin * cout;
  if (n == 0) return;
  hwio_to_ohwi_kernel<<<blocks_for(n), 256, 0, s>>>(w, o, khw, cin, cout);
  DT_CUDA_LAUNCHED();
}

void add_ohwi_to_hwio(const float* o, float* w, int64_t khw, int64_t cin, int64_t cout, cudaStream_t s) {
  const int64_t n = khw * cin * cout;
  if (n == 0) return;
  add_ohwi_to_hwio_kernel<<<blocks_for(n), 256, 0, s>>>(o, w, khw, cin, cout);
  DT_CUDA_LAUNCHED();
}

void pad_nhwc(const float* x, float* xp, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
              int64_t ph, int64_t pw, cudaStream_t s) {
  const int64_t total = n * ph * pw * c;
  if (total == 0) return;
  pad_kernel<<<blocks_for(total), 256, 0, s>>>(x, xp, n, h, w, c, top, left, ph, pw);
  DT_CUDA_LAUNCHED();
}

void crop_nhwc(const float* dxp, float* dx, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
               int64_t ph, int64_t pw, cudaStream_t s) {
  const int64_t total = n * h * w * c;
  if (total == 0) return;
  crop_kernel<<<blocks_for(total), 256, 0, s>>>(dxp, dx, n, h, w, c, top, left, ph, pw);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
