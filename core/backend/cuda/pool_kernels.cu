// Max and average pooling on NHWC with TensorFlow's semantics (padded cells never count,
// the first maximum wins), as the CPU twin. The backward pass gathers (each input cell
// sums the outputs whose window holds it) rather than scattering with atomics, so it is
// deterministic also where windows overlap.
#include <cmath>

#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"

namespace distrain::cuda {

namespace {

// Input rows/cols of output (oh, ow), padding excluded: [h0, h1) x [w0, w1).
__device__ void window(const PoolGeometry& g, int64_t oh, int64_t ow, int64_t& h0, int64_t& h1, int64_t& w0,
                       int64_t& w1) {
  const int64_t h = oh * g.stride_h - g.pad_top, w = ow * g.stride_w - g.pad_left;
  h0 = h > 0 ? h : 0;
  h1 = h + g.kernel_h < g.in_h ? h + g.kernel_h : g.in_h;
  w0 = w > 0 ? w : 0;
  w1 = w + g.kernel_w < g.in_w ? w + g.kernel_w : g.in_w;
}

// The outputs whose window may hold input index i along one axis: [lo, hi).
__device__ void outputs_covering(int64_t i, int64_t stride, int64_t pad, int64_t kernel, int64_t out, int64_t& lo,
                                 int64_t& hi) {
  const int64_t p = i + pad;
  lo = p - kernel + 1 <= 0 ? 0 : (p - kernel + stride) / stride;  // ceil((p - kernel + 1) / stride)
  hi = p / stride + 1;
  if (hi > out) hi = out;
}

__global__ void forward_kernel(PoolGeometry g, const float* x, float* y, int32_t* argmax, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t c = g.channels;
  const int64_t k = i % c, ow = i / c % g.out_w, oh = i / (c * g.out_w) % g.out_h, b = i / (c * g.out_w * g.out_h);
  int64_t h0, h1, w0, w1;
  window(g, oh, ow, h0, h1, w0, w1);
  if (g.max) {
    float best = -INFINITY;
    int32_t arg = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) {
        const int64_t cell = (b * g.in_h + ih) * g.in_w + iw;
        const float v = x[cell * c + k];
        if (v > best) {
          best = v;
          arg = static_cast<int32_t>(cell);
        }
      }
    y[i] = best;
    if (argmax) argmax[i] = arg;
  } else {
    float sum = 0.0f;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) sum += x[((b * g.in_h + ih) * g.in_w + iw) * c + k];
    y[i] = sum * (1.0f / static_cast<float>((h1 - h0) * (w1 - w0)));
  }
}

__global__ void backward_kernel(PoolGeometry g, const float* dy, const int32_t* argmax, float* dx, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t c = g.channels;
  const int64_t k = i % c, iw = i / c % g.in_w, ih = i / (c * g.in_w) % g.in_h, b = i / (c * g.in_w * g.in_h);
  const int64_t cell = (b * g.in_h + ih) * g.in_w + iw;
  int64_t oh0, oh1, ow0, ow1;
  outputs_covering(ih, g.stride_h, g.pad_top, g.kernel_h, g.out_h, oh0, oh1);
  outputs_covering(iw, g.stride_w, g.pad_left, g.kernel_w, g.out_w, ow0, ow1);
  float sum = 0.0f;
  for (int64_t oh = oh0; oh < oh1; ++oh)
    for (int64_t ow = ow0; ow < ow1; ++ow) {
      const int64_t o = ((b * g.out_h + oh) * g.out_w + ow) * c + k;
      if (g.max) {
        if (argmax[o] == cell) sum += dy[o];
      } else {
        int64_t h0, h1, w0, w1;
        window(g, oh, ow, h0, h1, w0, w1);
        sum += dy[o] * (1.0f / static_cast<float>((h1 - h0) * (w1 - w0)));
      }
    }
  dx[i] = sum;
}

}  // namespace

void pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax, int64_t batch, cudaStream_t s) {
  const int64_t total = batch * g.out_h * g.out_w * g.channels;
  if (total == 0) return;
  forward_kernel<<<blocks_for(total), 256, 0, s>>>(g, x, y, argmax, total);
  DT_CUDA_LAUNCHED();
}

void pool_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax, float* dx, int64_t batch,
                   cudaStream_t s) {
  const int64_t total = batch * g.in_h * g.in_w * g.channels;
  if (total == 0) return;
  backward_kernel<<<blocks_for(total), 256, 0, s>>>(g, dy, argmax, dx, total);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
