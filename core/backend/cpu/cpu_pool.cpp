// Max and average pooling on NHWC with OpenMP. Written by hand rather than on oneDNN:
// oneDNN 2.6's pooling on NHWC took 2.5 ms forward and 1.8 ms backward for the default
// CNN's first pool at batch 64 (DNNL_VERBOSE), several times the memory-bound cost.
// Channels are innermost, so every loop runs over C contiguous floats.
#include <algorithm>
#include <limits>
#include <vector>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_vector_math.hpp"

namespace distrain {

namespace {

// out[k] = max(out[k], in[k]) over C channels, and where `in` wins (strictly: the first
// maximum stays, as TensorFlow's) arg[k] = cell. Branch-free so that it vectorises; built
// for AVX-512, AVX2 and any x86-64, the best chosen when the program starts.
DT_VECTOR_CLONES void max_into(float* __restrict out, int32_t* __restrict arg,
                                                                    const float* __restrict in, int32_t cell, int64_t c) {
  for (int64_t k = 0; k < c; ++k) {
    const bool wins = in[k] > out[k];
    out[k] = wins ? in[k] : out[k];
    arg[k] = wins ? cell : arg[k];
  }
}

DT_VECTOR_CLONES void max_into(float* __restrict out, const float* __restrict in,
                                                                    int64_t c) {
  for (int64_t k = 0; k < c; ++k) out[k] = in[k] > out[k] ? in[k] : out[k];
}

// d[k] = g[k] where cell won channel k, else 0: a window's cell written once.
DT_VECTOR_CLONES void put_winner(float* __restrict d, const int32_t* __restrict arg,
                                                                      int32_t cell, const float* __restrict g, int64_t c) {
  for (int64_t k = 0; k < c; ++k) d[k] = arg[k] == cell ? g[k] : 0.0f;
}

// d[k] += g[k] where cell won channel k: windows that overlap. Cells are compared after the
// same 32-bit cast as recorded, never used as addresses, so a wrapped index cannot write
// outside the image.
void add_winner(float* __restrict d, const int32_t* __restrict arg, int32_t cell, const float* __restrict g, int64_t c) {
  for (int64_t k = 0; k < c; ++k) d[k] += arg[k] == cell ? g[k] : 0.0f;
}

class CpuPool2D final : public Pool2DOp {
 public:
  explicit CpuPool2D(const Pool2DSpec& s) : s_(s) {}

  void forward(const Tensor& x, Tensor y, bool training) override {
    const int64_t n = x.shape[0], c = s_.channels;
    const float* px = x.f32();
    float* py = y.f32();
    const bool record = training && s_.kind == PoolKind::max;
    if (record) argmax_.resize(static_cast<size_t>(y.numel()));
#pragma omp parallel for collapse(2)
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oh = 0; oh < s_.out_h; ++oh)
        for (int64_t ow = 0; ow < s_.out_w; ++ow) {
          const Window w = window(oh, ow);
          float* out = py + ((b * s_.out_h + oh) * s_.out_w + ow) * c;
          if (s_.kind == PoolKind::max) {
            int32_t* arg = record ? argmax_.data() + (out - py) : nullptr;
            // The first cell starts the maximum (a window always holds one: padding < kernel).
            const int64_t first = (b * s_.in_h + w.h0) * s_.in_w + w.w0;
            std::copy_n(px + first * c, c, out);
            if (arg) std::fill(arg, arg + c, static_cast<int32_t>(first));
            for (int64_t ih = w.h0; ih < w.h1; ++ih)
              for (int64_t iw = ih == w.h0 ? w.w0 + 1 : w.w0; iw < w.w1; ++iw) {
                const int64_t cell = (b * s_.in_h + ih) * s_.in_w + iw;
                if (arg)
                  max_into(out, arg, px + cell * c, static_cast<int32_t>(cell), c);
                else
                  max_into(out, px + cell * c, c);
              }
          } else {
            std::fill(out, out + c, 0.0f);
            for (int64_t ih = w.h0; ih < w.h1; ++ih)
              for (int64_t iw = w.w0; iw < w.w1; ++iw) {
                const float* in = px + ((b * s_.in_h + ih) * s_.in_w + iw) * c;
                for (int64_t k = 0; k < c; ++k) out[k] += in[k];
              }
            const float inv = 1.0f / static_cast<float>(w.count());
            for (int64_t k = 0; k < c; ++k) out[k] *= inv;
          }
        }
  }

  void backward(const Tensor& dy, Tensor dx) override {
    const int64_t n = dy.shape[0], c = s_.channels;
    const float* pdy = dy.f32();
    float* pdx = dx.f32();
    DT_CHECK(s_.kind == PoolKind::average || static_cast<int64_t>(argmax_.size()) == dy.numel(),
             "max-pool backward without a training forward of the same batch");
    // Windows that never overlap (stride >= kernel, as in the usual 2x2 pool) own their
    // cells, so each cell's gradient is written once; where they also tile the image, it
    // needs no clearing first. One image per thread: images never share cells.
    const bool disjoint = s_.stride_h >= s_.kernel_h && s_.stride_w >= s_.kernel_w;
    const bool tiled = disjoint && s_.stride_h == s_.kernel_h && s_.stride_w == s_.kernel_w &&
                       s_.out_h * s_.stride_h == s_.in_h + s_.pad_top + s_.pad_bottom &&
                       s_.out_w * s_.stride_w == s_.in_w + s_.pad_left + s_.pad_right;
#pragma omp parallel for
    for (int64_t b = 0; b < n; ++b) {
      float* dimg = pdx + b * s_.in_h * s_.in_w * c;
      if (!tiled) std::fill(dimg, dimg + s_.in_h * s_.in_w * c, 0.0f);
      for (int64_t oh = 0; oh < s_.out_h; ++oh)
        for (int64_t ow = 0; ow < s_.out_w; ++ow) {
          const int64_t o = ((b * s_.out_h + oh) * s_.out_w + ow) * c;
          const float* g = pdy + o;
          const Window w = window(oh, ow);
          if (s_.kind == PoolKind::max) {
            for (int64_t ih = w.h0; ih < w.h1; ++ih)
              for (int64_t iw = w.w0; iw < w.w1; ++iw) {
                const int64_t cell = (b * s_.in_h + ih) * s_.in_w + iw;
                (disjoint ? put_winner : add_winner)(pdx + cell * c, argmax_.data() + o, static_cast<int32_t>(cell), g, c);
              }
          } else {
            const float inv = 1.0f / static_cast<float>(w.count());
            for (int64_t ih = w.h0; ih < w.h1; ++ih)
              for (int64_t iw = w.w0; iw < w.w1; ++iw) {
                float* d = pdx + ((b * s_.in_h + ih) * s_.in_w + iw) * c;
                if (disjoint)
                  for (int64_t k = 0; k < c; ++k) d[k] = g[k] * inv;
                else
                  for (int64_t k = 0; k < c; ++k) d[k] += g[k] * inv;
              }
          }
        }
    }
  }

 private:
  // The input cells of output (oh, ow), padding excluded: [h0, h1) x [w0, w1).
  struct Window {
    int64_t h0, h1, w0, w1;
    int64_t count() const { return (h1 - h0) * (w1 - w0); }
  };
  Window window(int64_t oh, int64_t ow) const {
    const int64_t h = oh * s_.stride_h - s_.pad_top, w = ow * s_.stride_w - s_.pad_left;
    return {std::max<int64_t>(h, 0), std::min(h + s_.kernel_h, s_.in_h), std::max<int64_t>(w, 0),
            std::min(w + s_.kernel_w, s_.in_w)};
  }

  Pool2DSpec s_;
  std::vector<int32_t> argmax_;  // per output element: the input cell (n, h, w) that won, cast to 32 bits
};

}  // namespace

std::unique_ptr<Pool2DOp> CpuBackend::make_pool2d(const Pool2DSpec& spec) { return std::make_unique<CpuPool2D>(spec); }

}  // namespace distrain
