// The CPU backend's SiLU and gated linear units (SwiGLU, GeGLU): element-wise, in tiles or
// rows on every thread, each element computed once in a fixed way.
#include <algorithm>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_vector_math.hpp"

namespace distrain {

namespace {

constexpr int64_t kTile = 1 << 14;  // elements a thread takes at once

// In place allowed (no __restrict).
DT_VECTOR_CLONES void silu_tile(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = vector_silu(x[i]);
}

DT_VECTOR_CLONES void silu_backward_tile(const float* x, const float* dy, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * vector_silu_slope(x[i]);
}

// One row: y (f) = act(gate) * up, from h = [gate | up] (2f).
DT_VECTOR_CLONES void gated_row(const float* __restrict h, int64_t f, bool silu, float* __restrict y) {
  const float* up = h + f;
  if (silu) {
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) y[j] = vector_silu(h[j]) * up[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) y[j] = vector_gelu(h[j]) * up[j];
  }
}

// One row's dh = [dy * up * act'(gate) | dy * act(gate)].
DT_VECTOR_CLONES void gated_row_backward(const float* __restrict h, const float* __restrict dy, int64_t f, bool silu,
                                         float* __restrict dh) {
  const float* up = h + f;
  if (silu) {
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) {
      dh[j] = dy[j] * up[j] * vector_silu_slope(h[j]);
      dh[f + j] = dy[j] * vector_silu(h[j]);
    }
  } else {
#pragma omp simd
    for (int64_t j = 0; j < f; ++j) {
      dh[j] = dy[j] * up[j] * vector_gelu_slope(h[j]);
      dh[f + j] = dy[j] * vector_gelu(h[j]);
    }
  }
}

int64_t gated_width(const Tensor& h, const Tensor& y) {
  const int64_t f = y.shape[y.shape.rank() - 1];
  DT_CHECK(h.numel() == 2 * y.numel() && h.shape[h.shape.rank() - 1] == 2 * f, "gated unit of {} into {}", h.shape.str(),
           y.shape.str());
  return f;
}

}  // namespace

void CpuBackend::silu(const Tensor& x, Tensor y, const OutputRounding& rounding) {
  check_same_numel(x, y);
  const int64_t n = x.numel(), tiles = (n + kTile - 1) / kTile;
  const float* px = x.f32();
  float* py = y.f32();
#pragma omp parallel for schedule(static) if (n > kTile)
  for (int64_t i = 0; i < tiles; ++i) silu_tile(px + i * kTile, py + i * kTile, std::min(kTile, n - i * kTile));
  round_output(y, rounding);
}

void CpuBackend::silu_backward(const Tensor& x, const Tensor& dy, Tensor dx) {
  check_same_numel(x, dx);
  const int64_t n = x.numel(), tiles = (n + kTile - 1) / kTile;
  const float *px = x.f32(), *pdy = dy.f32();
  float* pdx = dx.f32();
#pragma omp parallel for schedule(static) if (n > kTile)
  for (int64_t i = 0; i < tiles; ++i)
    silu_backward_tile(px + i * kTile, pdy + i * kTile, pdx + i * kTile, std::min(kTile, n - i * kTile));
}

void CpuBackend::gated_unit(const Tensor& h, GateActivation act, Tensor y, const OutputRounding& rounding) {
  const int64_t f = gated_width(h, y), rows = y.numel() / f;
  const float* ph = h.f32();
  float* py = y.f32();
#pragma omp parallel for if (rows > kParallelRows)
  for (int64_t r = 0; r < rows; ++r) gated_row(ph + r * 2 * f, f, act == GateActivation::silu, py + r * f);
  round_output(y, rounding);
}

void CpuBackend::gated_unit_backward(const Tensor& h, GateActivation act, const Tensor& dy, Tensor dh) {
  const int64_t f = gated_width(h, dy), rows = dy.numel() / f;
  check_same_numel(h, dh);
  const float *ph = h.f32(), *pdy = dy.f32();
  float* pdh = dh.f32();
#pragma omp parallel for if (rows > kParallelRows)
  for (int64_t r = 0; r < rows; ++r)
    gated_row_backward(ph + r * 2 * f, pdy + r * f, f, act == GateActivation::silu, pdh + r * 2 * f);
}

}  // namespace distrain
