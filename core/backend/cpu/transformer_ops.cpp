// The CPU backend's transformer ops: embedding, layer norm, RMS norm and GELU (attention:
// cpu_attention.cpp; rotary positions: cpu_rotary.cpp; SiLU and gated units:
// cpu_gated_units.cpp). Loops over rows or tiles in parallel; each output element is computed
// by one thread in a fixed order, so results do not depend on the thread count. The row and
// tile bodies are cloned for AVX-512 and AVX2 (DT_VECTOR_CLONES).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_vector_math.hpp"

namespace distrain {

namespace {

constexpr int64_t kTile = 1 << 14;             // elements of an element-wise pass a thread takes at once

// y += x over n elements.
DT_VECTOR_CLONES void add_into(float* __restrict y, const float* __restrict x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// out (n, C) = the rows of table (V, C) for ids [first, first + V), zeros for other ids.
void lookup_rows(const Tensor& table, const Tensor& ids, int64_t first, Tensor out) {
  const int64_t c = table.shape[1], rows = table.shape[0], n = ids.numel();
  DT_CHECK(out.numel() == n * c, "embedding of {} ids into {}", n, out.shape.str());
  const int32_t* id = ids.i32();
  const float* w = table.f32();
  float* y = out.f32();
#pragma omp parallel for if (n > kParallelRows)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = id[i] - first;
    if (row >= 0 && row < rows)
      std::copy_n(w + row * c, c, y + i * c);
    else
      std::fill_n(y + i * c, c, 0.0f);
  }
}

}  // namespace

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
  const int64_t vocab = table.shape[0], n = ids.numel();
  const int32_t* id = ids.i32();
  for (int64_t i = 0; i < n; ++i) DT_CHECK(id[i] >= 0 && id[i] < vocab, "token {} of a vocabulary of {}", id[i], vocab);
  lookup_rows(table, ids, 0, out);
}

void CpuBackend::embedding_backward(const Tensor& ids, const Tensor& dout, Tensor dtable) {
  embedding_slice_backward(ids, 0, dout, dtable);
}

void CpuBackend::embedding_slice(const Tensor& table, const Tensor& ids, int64_t first, Tensor out) {
  const int32_t* id = ids.i32();
  for (int64_t i = 0; i < ids.numel(); ++i) DT_CHECK(id[i] >= 0, "token {}", id[i]);  // past the vocabulary: refused by preflight
  lookup_rows(table, ids, first, out);
}

// Serial over ids: two positions with one token add into the same row, in a fixed order.
void CpuBackend::embedding_slice_backward(const Tensor& ids, int64_t first, const Tensor& dout, Tensor dtable) {
  const int64_t c = dtable.shape[1], rows = dtable.shape[0], n = ids.numel();
  const int32_t* id = ids.i32();
  const float* dy = dout.f32();
  float* dw = dtable.f32();
  for (int64_t i = 0; i < n; ++i)
    if (const int64_t row = id[i] - first; row >= 0 && row < rows) add_into(dw + row * c, dy + i * c, c);
}

namespace {

// One row of layer norm: its mean and reciprocal deviation, and y.
DT_VECTOR_CLONES void layer_norm_row(const float* x, const float* g, const float* b, int64_t c, float epsilon, float* y,
                                     float* mean, float* rstd) {
  double sum = 0.0, squares = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < c; ++j) sum += x[j];
  const double mu = sum / static_cast<double>(c);
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < c; ++j) squares += (x[j] - mu) * (x[j] - mu);
  const auto m = static_cast<float>(mu);
  const auto s = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(c) + epsilon));
  *mean = m;
  *rstd = s;
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) y[j] = (x[j] - m) * s * g[j] + b[j];
}

// The parameter gradients, summed over rows in order (rows outer), as bias_grad.
DT_VECTOR_CLONES void layer_norm_parameter_grads(const float* __restrict x, const float* __restrict dy,
                                                 const float* mean, const float* rstd, int64_t rows, int64_t c,
                                                 float* __restrict dg, float* __restrict db) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * c, *dyr = dy + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) {
      dg[j] += dyr[j] * ((xr[j] - mean[r]) * rstd[r]);
      db[j] += dyr[j];
    }
  }
}

// One row of layer norm's input gradient.
DT_VECTOR_CLONES void layer_norm_input_grad_row(const float* x, const float* dy, const float* g, float mean,
                                                float rstd, int64_t c, float* dx) {
  float mean_dn = 0.0f, mean_dn_norm = 0.0f;  // means of dnorm and dnorm * norm over the row
#pragma omp simd reduction(+ : mean_dn, mean_dn_norm)
  for (int64_t j = 0; j < c; ++j) {
    const float dn = dy[j] * g[j];
    mean_dn += dn;
    mean_dn_norm += dn * (x[j] - mean) * rstd;
  }
  mean_dn /= static_cast<float>(c);
  mean_dn_norm /= static_cast<float>(c);
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) {
    const float norm = (x[j] - mean) * rstd;
    dx[j] = (dy[j] * g[j] - mean_dn - norm * mean_dn_norm) * rstd;
  }
}

// One row of RMS norm: its reciprocal root mean square, and y.
DT_VECTOR_CLONES void rms_norm_row(const float* x, const float* g, int64_t c, float epsilon, float* y, float* rstd) {
  double squares = 0.0;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < c; ++j) squares += double{x[j]} * x[j];
  const auto s = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(c) + epsilon));
  *rstd = s;
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) y[j] = x[j] * s * g[j];
}

// RMS norm's gamma gradient, summed over rows in order (rows outer).
DT_VECTOR_CLONES void rms_norm_gamma_grad(const float* __restrict x, const float* __restrict dy, const float* rstd,
                                          int64_t rows, int64_t c, float* __restrict dg) {
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * c, *dyr = dy + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) dg[j] += dyr[j] * (xr[j] * rstd[r]);
  }
}

// One row of RMS norm's input gradient: rstd (dy g - x rstd^2 mean(dy g x)).
DT_VECTOR_CLONES void rms_norm_input_grad_row(const float* x, const float* dy, const float* g, float rstd, int64_t c,
                                              float* dx) {
  float mean_dn_x = 0.0f;
#pragma omp simd reduction(+ : mean_dn_x)
  for (int64_t j = 0; j < c; ++j) mean_dn_x += dy[j] * g[j] * x[j];
  mean_dn_x /= static_cast<float>(c);
  const float k = rstd * rstd * mean_dn_x;
#pragma omp simd
  for (int64_t j = 0; j < c; ++j) dx[j] = (dy[j] * g[j] - x[j] * k) * rstd;
}

// GELU's tiles may be computed in place (no __restrict): GCC checks the overlap at run time.
DT_VECTOR_CLONES void gelu_tile(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = vector_gelu(x[i]);
}

DT_VECTOR_CLONES void gelu_backward_tile(const float* x, const float* dy, float* dx,
                                         int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * vector_gelu_slope(x[i]);
}

}  // namespace

void CpuBackend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float epsilon, Tensor y,
                            Tensor mean, Tensor rstd, const OutputRounding& rounding) {
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  const float *px = x.f32(), *g = gamma.f32(), *b = beta.f32();
  float *py = y.f32(), *pm = mean.f32(), *pr = rstd.f32();
#pragma omp parallel for if (rows > kParallelRows)
  for (int64_t r = 0; r < rows; ++r) layer_norm_row(px + r * c, g, b, c, epsilon, py + r * c, pm + r, pr + r);
  round_output(y, rounding);
}

void CpuBackend::layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                     const Tensor& rstd, Tensor dx, Tensor dgamma, Tensor dbeta) {
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  const float *px = x.f32(), *pdy = dy.f32(), *g = gamma.f32(), *pm = mean.f32(), *pr = rstd.f32();
  layer_norm_parameter_grads(px, pdy, pm, pr, rows, c, dgamma.f32(), dbeta.f32());
  if (dx.empty()) return;
  float* pdx = dx.f32();
#pragma omp parallel for if (rows > kParallelRows)
  for (int64_t r = 0; r < rows; ++r) layer_norm_input_grad_row(px + r * c, pdy + r * c, g, pm[r], pr[r], c, pdx + r * c);
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& gamma, float epsilon, Tensor y, Tensor rstd,
                          const OutputRounding& rounding) {
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  const float *px = x.f32(), *g = gamma.f32();
  float *py = y.f32(), *pr = rstd.f32();
#pragma omp parallel for if (rows > kParallelRows)
  for (int64_t r = 0; r < rows; ++r) rms_norm_row(px + r * c, g, c, epsilon, py + r * c, pr + r);
  round_output(y, rounding);
}

void CpuBackend::rms_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& rstd, Tensor dx,
                                   Tensor dgamma) {
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  const float *px = x.f32(), *pdy = dy.f32(), *g = gamma.f32(), *pr = rstd.f32();
  rms_norm_gamma_grad(px, pdy, pr, rows, c, dgamma.f32());
  if (dx.empty()) return;
  float* pdx = dx.f32();
#pragma omp parallel for if (rows > kParallelRows)
  for (int64_t r = 0; r < rows; ++r) rms_norm_input_grad_row(px + r * c, pdy + r * c, g, pr[r], c, pdx + r * c);
}

void CpuBackend::gelu(const Tensor& x, Tensor y, const OutputRounding& rounding) {
  check_same_numel(x, y);
  const int64_t n = x.numel(), tiles = (n + kTile - 1) / kTile;
  const float* px = x.f32();
  float* py = y.f32();
#pragma omp parallel for schedule(static) if (n > kTile)
  for (int64_t i = 0; i < tiles; ++i) gelu_tile(px + i * kTile, py + i * kTile, std::min(kTile, n - i * kTile));
  round_output(y, rounding);
}

void CpuBackend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) {
  check_same_numel(x, dx);
  const int64_t n = x.numel(), tiles = (n + kTile - 1) / kTile;
  const float *px = x.f32(), *pdy = dy.f32();
  float* pdx = dx.f32();
#pragma omp parallel for schedule(static) if (n > kTile)
  for (int64_t i = 0; i < tiles; ++i)
    gelu_backward_tile(px + i * kTile, pdy + i * kTile, pdx + i * kTile, std::min(kTile, n - i * kTile));
}

}  // namespace distrain
