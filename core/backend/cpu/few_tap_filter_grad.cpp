// The kernel gradient as a sum over output positions of outer products: each position's
// taps (at most kMaxFewTaps values of the input, and a constant 1 whose row is the bias
// gradient) times its output gradient (Cout values). One output row at a time: its taps
// are gathered into a small table (zeros for padding), then for each 16 output channels
// one group of taps accumulates in registers over the row's positions. oneDNN 2.6 took
// 0.54 ms for the default CNN's first convolution at batch 64 (9 taps, 32 filters).
#include "core/backend/cpu/few_tap_filter_grad.hpp"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

namespace distrain {

namespace {

constexpr int64_t kLanes = 16;
constexpr int64_t kMaxGroup = 17;       // taps accumulated in registers at once (16 + the bias)
constexpr int64_t kImagesPerBlock = 4;  // partial sums per 4 images: fixed, whatever the threads
// 16 floats in registers; InMemory: the same at any float's address, aliasing floats.
using Lanes = float __attribute__((vector_size(kLanes * sizeof(float))));
using InMemory = float __attribute__((vector_size(kLanes * sizeof(float)), aligned(alignof(float)), may_alias));

// acc rows [t0, t0 + G) (stride c, lanes k0..k0+16) += sum over the row's positions p of
// taps[p][t0 + j] * g[p][k0..].
template <int G>
[[gnu::target("avx512f")]] void accumulate_group(float* acc, const float* taps, int64_t stride, int64_t t0,
                                                 const float* g, int64_t positions, int64_t c, int64_t k0) {
  // Unrolled whole (GCC unrolls up to 16 by itself), so that a[] lives in registers.
  Lanes a[G];
#pragma GCC unroll 17
  for (int j = 0; j < G; ++j) a[j] = *reinterpret_cast<const InMemory*>(acc + (t0 + j) * c + k0);
  for (int64_t p = 0; p < positions; ++p) {
    const Lanes gv = *reinterpret_cast<const InMemory*>(g + p * c + k0);
    const float* tp = taps + p * stride + t0;
#pragma GCC unroll 17
    for (int j = 0; j < G; ++j) a[j] += tp[j] * gv;
  }
#pragma GCC unroll 17
  for (int j = 0; j < G; ++j) *reinterpret_cast<InMemory*>(acc + (t0 + j) * c + k0) = a[j];
}

using GroupFn = void (*)(float*, const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t);
template <size_t... G>
constexpr std::array<GroupFn, sizeof...(G)> group_table(std::index_sequence<G...>) {
  return {&accumulate_group<static_cast<int>(G) + 1>...};
}
constexpr auto kGroups = group_table(std::make_index_sequence<kMaxGroup>{});

// out = g where y > 0, else 0: the ReLU's backward pass on one row, kept in L1.
[[gnu::target("avx512f")]] const float* mask_row(const float* __restrict g, const float* __restrict y, int64_t count,
                                                 float* __restrict out) {
  for (int64_t i = 0; i < count; ++i) out[i] = y[i] > 0.0f ? g[i] : 0.0f;
  return out;
}

// Row oh of image `img`: taps[ow][t] (t over kh x kw x Cin, then the constant 1). Tap by
// tap, so that each copy is a short strided loop rather than a call per value.
void gather_row(const Conv2DSpec& s, const float* img, int64_t oh, int64_t stride, float* taps) {
  const int64_t h0 = oh * s.stride_h - s.pad_top;
  for (int64_t r = 0; r < s.kernel_h; ++r) {
    const int64_t ih = h0 + r;
    const bool inside = ih >= 0 && ih < s.in_h;
    for (int64_t q = 0; q < s.kernel_w; ++q) {
      // Positions [lo, hi) read inside the image; the others read padding.
      const int64_t first = q - s.pad_left;  // iw at ow = 0
      const int64_t lo = inside ? std::min(s.out_w, first >= 0 ? 0 : (-first + s.stride_w - 1) / s.stride_w) : s.out_w;
      const int64_t hi = inside ? std::max(lo, std::min(s.out_w, (s.in_w - first + s.stride_w - 1) / s.stride_w)) : lo;
      for (int64_t ci = 0; ci < s.in_c; ++ci) {
        float* out = taps + (r * s.kernel_w + q) * s.in_c + ci;
        for (int64_t ow = 0; ow < lo; ++ow) out[ow * stride] = 0.0f;
        for (int64_t ow = lo; ow < hi; ++ow) out[ow * stride] = img[(ih * s.in_w + first + ow * s.stride_w) * s.in_c + ci];
        for (int64_t ow = hi; ow < s.out_w; ++ow) out[ow * stride] = 0.0f;
      }
    }
  }
  for (int64_t ow = 0; ow < s.out_w; ++ow) taps[ow * stride + stride - 1] = 1.0f;
}

}  // namespace

void few_tap_filter_grad(const Conv2DSpec& s, int64_t n, const float* x, const float* dy, const float* relu_y,
                         float* dw, float* db) {
  const int64_t ntaps = s.in_c * s.kernel_h * s.kernel_w + 1, c = s.out_c;  // + 1: the bias
  const int64_t groups = (ntaps + kMaxGroup - 1) / kMaxGroup, group = (ntaps + groups - 1) / groups;
  const int64_t block = ntaps * c, blocks = (n + kImagesPerBlock - 1) / kImagesPerBlock;
  const int64_t in_image = s.in_h * s.in_w * s.in_c, out_image = s.out_h * s.out_w * c;
  std::vector<float> partial(static_cast<size_t>(blocks * block), 0.0f);
#pragma omp parallel
  {
    std::vector<float> taps(static_cast<size_t>(s.out_w * ntaps)), masked(static_cast<size_t>(s.out_w * c));
#pragma omp for schedule(static)
    for (int64_t bl = 0; bl < blocks; ++bl) {
      float* acc = partial.data() + bl * block;
      for (int64_t b = bl * kImagesPerBlock; b < std::min(n, (bl + 1) * kImagesPerBlock); ++b)
        for (int64_t oh = 0; oh < s.out_h; ++oh) {
          gather_row(s, x + b * in_image, oh, ntaps, taps.data());
          const int64_t row = b * out_image + oh * s.out_w * c;
          const float* g = relu_y ? mask_row(dy + row, relu_y + row, s.out_w * c, masked.data()) : dy + row;
          for (int64_t k0 = 0; k0 < c; k0 += kLanes)
            for (int64_t t0 = 0; t0 < ntaps; t0 += group)
              kGroups[static_cast<size_t>(std::min(group, ntaps - t0) - 1)](acc, taps.data(), ntaps, t0, g, s.out_w, c, k0);
        }
    }
  }
  // Blocks in order; the weights split across threads.
#pragma omp parallel for schedule(static) if (block >= 4096)
  for (int64_t i = 0; i < block; ++i) {
    float sum = 0.0f;
    for (int64_t bl = 0; bl < blocks; ++bl) sum += partial[static_cast<size_t>(bl * block + i)];
    if (i < block - c)
      dw[i] += sum;
    else if (db)
      db[i - (block - c)] += sum;
  }
}

}  // namespace distrain
