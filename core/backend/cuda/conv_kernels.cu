// Layout helpers around cuDNN's convolution: kernel transposes, explicit padding, and
// im2col for the kernel gradient as matrix products (gemm_filter_grad.cpp).
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

// 32-bit index arithmetic: 64-bit division costs many instructions per element.
struct Windows32 {
  int32_t h, w, c, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
};

__global__ void im2col_kernel(Windows32 g, const float* x, int32_t first, int32_t total, float* col) {
  const int32_t t = grid_index<int32_t>();
  if (t >= total) return;
  const int32_t kdim = g.kernel_h * g.kernel_w * g.c;
  const int32_t kk = t % kdim, m = first + t / kdim;
  const int32_t ch = kk % g.c, ij = kk / g.c, j = ij % g.kernel_w, i = ij / g.kernel_w;
  const int32_t ow = m % g.out_w, q = m / g.out_w, oh = q % g.out_h, n = q / g.out_h;
  const int32_t h = oh * g.stride_h - g.pad_top + i, w = ow * g.stride_w - g.pad_left + j;
  col[t] = (h >= 0 && h < g.h && w >= 0 && w < g.w)
               ? x[((static_cast<int64_t>(n) * g.h + h) * g.w + w) * g.c + ch]
               : 0.0f;
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

void im2col(const ConvWindows& g, const float* x, int64_t first, int64_t rows, float* col, cudaStream_t s) {
  const int64_t total = rows * g.kernel_h * g.kernel_w * g.c;
  if (total == 0) return;
  auto i = [](int64_t v) { return static_cast<int32_t>(v); };
  const Windows32 g32{i(g.h),        i(g.w),        i(g.c),        i(g.out_h),   i(g.out_w),   i(g.kernel_h),
                      i(g.kernel_w), i(g.stride_h), i(g.stride_w), i(g.pad_top), i(g.pad_left)};
  im2col_kernel<<<blocks_for(total), 256, 0, s>>>(g32, x, i(first), i(total), col);
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
