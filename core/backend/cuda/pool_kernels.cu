// Max and average pooling on NHWC with TensorFlow's semantics (padded cells never count,
// the first maximum wins), as the CPU twin. The backward pass gathers (each input cell
// sums the outputs whose window holds it) rather than scattering with atomics, so it is
// deterministic also where windows overlap.
#include <algorithm>
#include <cmath>

#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"

namespace distrain::cuda {

namespace {

// The geometry in the index type I: 32-bit where the tensors allow it, as 64-bit division
// and remainder cost many instructions each and bound these kernels otherwise.
template <typename I>
struct Dims {
  I in_h, in_w, channels, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
  bool max;
};

template <typename I>
Dims<I> dims_of(const PoolGeometry& g) {
  auto i = [](int64_t v) { return static_cast<I>(v); };
  return Dims<I>{i(g.in_h),     i(g.in_w),     i(g.channels), i(g.out_h),   i(g.out_w),    i(g.kernel_h),
                 i(g.kernel_w), i(g.stride_h), i(g.stride_w), i(g.pad_top), i(g.pad_left), g.max};
}

// Input rows/cols of output (oh, ow), padding excluded: [h0, h1) x [w0, w1).
template <typename I>
__device__ void window(const Dims<I>& g, I oh, I ow, I& h0, I& h1, I& w0, I& w1) {
  const I h = oh * g.stride_h - g.pad_top, w = ow * g.stride_w - g.pad_left;
  h0 = h > 0 ? h : 0;
  h1 = h + g.kernel_h < g.in_h ? h + g.kernel_h : g.in_h;
  w0 = w > 0 ? w : 0;
  w1 = w + g.kernel_w < g.in_w ? w + g.kernel_w : g.in_w;
}

// The outputs whose window may hold input index i along one axis: [lo, hi).
template <typename I>
__device__ void outputs_covering(I i, I stride, I pad, I kernel, I out, I& lo, I& hi) {
  const I p = i + pad;
  lo = p - kernel + 1 <= 0 ? 0 : (p - kernel + stride) / stride;  // ceil((p - kernel + 1) / stride)
  hi = p / stride + 1;
  if (hi > out) hi = out;
}

template <typename I>
__global__ void forward_kernel(Dims<I> g, const float* x, float* y, int32_t* argmax, I total) {
  const I i = grid_index<I>();
  if (i >= total) return;
  const I c = g.channels;
  const I k = i % c, pixel = i / c;  // pixel: (b, oh, ow)
  const I ow = pixel % g.out_w, rows = pixel / g.out_w;
  const I oh = rows % g.out_h, b = rows / g.out_h;
  I h0, h1, w0, w1;
  window(g, oh, ow, h0, h1, w0, w1);
  if (g.max) {
    // The first cell starts the maximum, as on the CPU (a window always holds one); the first
    // maximum stays, as TensorFlow's.
    const I first = (b * g.in_h + h0) * g.in_w + w0;
    float best = x[static_cast<int64_t>(first) * c + k];
    int32_t arg = static_cast<int32_t>(first);
    for (I ih = h0; ih < h1; ++ih)
      for (I iw = w0; iw < w1; ++iw) {
        const I cell = (b * g.in_h + ih) * g.in_w + iw;
        const float v = x[static_cast<int64_t>(cell) * c + k];
        if (v > best) {
          best = v;
          arg = static_cast<int32_t>(cell);
        }
      }
    y[i] = best;
    if (argmax) argmax[i] = arg;
  } else {
    float sum = 0.0f;
    for (I ih = h0; ih < h1; ++ih)
      for (I iw = w0; iw < w1; ++iw) sum += x[static_cast<int64_t>((b * g.in_h + ih) * g.in_w + iw) * c + k];
    y[i] = sum * (1.0f / static_cast<float>((h1 - h0) * (w1 - w0)));
  }
}

template <typename I>
__global__ void backward_kernel(Dims<I> g, const float* dy, const int32_t* argmax, float* dx, I total) {
  const I i = grid_index<I>();
  if (i >= total) return;
  const I c = g.channels;
  const I k = i % c, cell = i / c;  // cell: (b, ih, iw)
  const I iw = cell % g.in_w, rows = cell / g.in_w;
  const I ih = rows % g.in_h, b = rows / g.in_h;
  I oh0, oh1, ow0, ow1;
  outputs_covering(ih, g.stride_h, g.pad_top, g.kernel_h, g.out_h, oh0, oh1);
  outputs_covering(iw, g.stride_w, g.pad_left, g.kernel_w, g.out_w, ow0, ow1);
  float sum = 0.0f;
  for (I oh = oh0; oh < oh1; ++oh)
    for (I ow = ow0; ow < ow1; ++ow) {
      const int64_t o = static_cast<int64_t>((b * g.out_h + oh) * g.out_w + ow) * c + k;
      if (g.max) {
        if (argmax[o] == static_cast<int32_t>(cell)) sum += dy[o];
      } else {
        I h0, h1, w0, w1;
        window(g, oh, ow, h0, h1, w0, w1);
        sum += dy[o] * (1.0f / static_cast<float>((h1 - h0) * (w1 - w0)));
      }
    }
  dx[i] = sum;
}

// 32-bit indices when every index of the input and the output fits.
bool fits_int32(const PoolGeometry& g, int64_t batch) {
  const int64_t largest = batch * std::max(g.in_h * g.in_w, g.out_h * g.out_w) * g.channels;
  return largest < kMaxInt32Index;
}

}  // namespace

void pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax, int64_t batch, cudaStream_t s) {
  const int64_t total = batch * g.out_h * g.out_w * g.channels;
  if (total == 0) return;
  if (fits_int32(g, batch))
    forward_kernel<int32_t><<<blocks_for(total), 256, 0, s>>>(dims_of<int32_t>(g), x, y, argmax, static_cast<int32_t>(total));
  else
    forward_kernel<int64_t><<<blocks_for(total), 256, 0, s>>>(dims_of<int64_t>(g), x, y, argmax, total);
  DT_CUDA_LAUNCHED();
}

void pool_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax, float* dx, int64_t batch,
                   cudaStream_t s) {
  const int64_t total = batch * g.in_h * g.in_w * g.channels;
  if (total == 0) return;
  if (fits_int32(g, batch))
    backward_kernel<int32_t><<<blocks_for(total), 256, 0, s>>>(dims_of<int32_t>(g), dy, argmax, dx, static_cast<int32_t>(total));
  else
    backward_kernel<int64_t><<<blocks_for(total), 256, 0, s>>>(dims_of<int64_t>(g), dy, argmax, dx, total);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
