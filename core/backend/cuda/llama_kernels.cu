// The kernels of Llama-family blocks, each the CPU twin's formula: RMS norm
// (core/backend/cpu/transformer_ops.cpp), rotary positions (cpu_rotary.cpp), SiLU and
// gated units (cpu_gated_units.cpp), and the copies that run grouped-query attention on
// the multi-head kernels (a query head's key and value heads expanded, their gradients
// summed back in a fixed order). No atomics: every output element is written by one thread.
#include <cmath>

#include "core/backend/cuda/bf16_bits.cuh"
#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"
#include "core/backend/cuda/warp_rows.cuh"

namespace distrain::cuda {

namespace {

__device__ int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

// --- RMS norm: a warp per row ---

__global__ void rms_norm_kernel(const float* x, const float* gamma, float epsilon, int64_t rows, int64_t c, float* y,
                                float* rstd, RoundOut out) {
  const int64_t r = warp_index();
  if (r >= rows) return;
  const float* xr = x + r * c;
  double squares = 0.0;
  for (int64_t j = lane(); j < c; j += kWarp) squares += static_cast<double>(xr[j]) * xr[j];
  squares = warp_sum(squares);
  const auto s = static_cast<float>(1.0 / sqrt(squares / static_cast<double>(c) + epsilon));
  if (lane() == 0) rstd[r] = s;
  for (int64_t j = lane(); j < c; j += kWarp) y[r * c + j] = rounded_output(xr[j] * s * gamma[j], out, r * c + j);
}

__global__ void rms_norm_dx_kernel(const float* x, const float* dy, const float* gamma, const float* rstd, int64_t rows,
                                   int64_t c, float* dx) {
  const int64_t r = warp_index();
  if (r >= rows) return;
  const float *xr = x + r * c, *dyr = dy + r * c;
  const float s = rstd[r];
  float sum = 0.0f;
  for (int64_t j = lane(); j < c; j += kWarp) sum += dyr[j] * gamma[j] * xr[j];
  const float k = s * s * (warp_sum(sum) / static_cast<float>(c));
  for (int64_t j = lane(); j < c; j += kWarp) dx[r * c + j] = (dyr[j] * gamma[j] - xr[j] * k) * s;
}

struct DyTimesScaled {
  const float *x, *dy, *rstd;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const { return dy[r * cols + c] * (x[r * cols + c] * rstd[r]); }
};

// --- rotary positions: a thread per (row, rotated head, pair) ---

__global__ void rotary_kernel(float* qkv, int64_t rows, int64_t t, int64_t width, int64_t rotated_heads, int64_t d,
                              const float* angles, float sign) {
  const int64_t half = d / 2, i = thread_index();
  if (i >= rows * rotated_heads * half) return;
  const int64_t e = i % half, head = i / half % rotated_heads, row = i / (half * rotated_heads);
  const int64_t position = row % t;
  const float cos = angles[position * half + e], sin = sign * angles[t * half + position * half + e];
  float* a = qkv + row * width + head * d + e;
  const float x1 = a[0], x2 = a[half];
  a[0] = x1 * cos - x2 * sin;
  a[half] = x2 * cos + x1 * sin;
}

// --- SiLU and gated units ---

__device__ float silu_of(float x) { return x / (1.0f + expf(-x)); }
__device__ float silu_slope(float x) {
  const float s = 1.0f / (1.0f + expf(-x));
  return s * (1.0f + x * (1.0f - s));
}

__global__ void silu_kernel(const float* x, float* y, int64_t n, RoundOut out) {
  const int64_t i = thread_index();
  if (i < n) y[i] = rounded_output(silu_of(x[i]), out, i);
}

__global__ void silu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  const int64_t i = thread_index();
  if (i < n) dx[i] = dy[i] * silu_slope(x[i]);
}

__global__ void gated_kernel(const float* h, int64_t rows, int64_t f, bool silu, float* y, RoundOut out) {
  const int64_t i = thread_index();
  if (i >= rows * f) return;
  const int64_t r = i / f, j = i % f;
  const float gate = h[r * 2 * f + j], up = h[r * 2 * f + f + j];
  y[i] = rounded_output((silu ? silu_of(gate) : gelu_of(gate)) * up, out, i);
}

__global__ void gated_backward_kernel(const float* h, const float* dy, int64_t rows, int64_t f, bool silu, float* dh) {
  const int64_t i = thread_index();
  if (i >= rows * f) return;
  const int64_t r = i / f, j = i % f;
  const float gate = h[r * 2 * f + j], up = h[r * 2 * f + f + j];
  dh[r * 2 * f + j] = dy[i] * up * (silu ? silu_slope(gate) : gelu_slope(gate));
  dh[r * 2 * f + f + j] = dy[i] * (silu ? silu_of(gate) : gelu_of(gate));
}

// --- grouped-query attention on the multi-head kernels ---

// wide (rows, 3 H d) = [q | k and v of each query head's group]: a thread per element.
template <typename T>
__global__ void expand_kv_kernel(const T* grouped, int64_t rows, int64_t heads, int64_t kv_heads, int64_t d, T* wide) {
  const int64_t hd = heads * d, i = thread_index();
  if (i >= rows * 3 * hd) return;
  const int64_t row = i / (3 * hd), col = i % (3 * hd), part = col / hd, h = col % hd / d, e = col % d;
  const int64_t from = part == 0 ? h * d + e : (heads + (part - 1) * kv_heads + h % kv_heads) * d + e;
  wide[i] = grouped[row * (heads + 2 * kv_heads) * d + from];
}

// grouped (rows, (H + 2 KV) d) = wide's query gradients, and each key or value head's the
// sum of its query heads' in head order: a thread per element of grouped.
__global__ void sum_kv_kernel(const float* wide, int64_t rows, int64_t heads, int64_t kv_heads, int64_t d,
                              float* grouped) {
  const int64_t width = (heads + 2 * kv_heads) * d, hd = heads * d, i = thread_index();
  if (i >= rows * width) return;
  const int64_t row = i / width, col = i % width;
  const float* w = wide + row * 3 * hd;
  if (col < hd) {
    grouped[i] = w[col];
    return;
  }
  const int64_t part = (col - hd) / (kv_heads * d), kv = (col - hd) % (kv_heads * d) / d, e = col % d;
  float sum = 0.0f;
  for (int64_t h = kv; h < heads; h += kv_heads) sum += w[(1 + part) * hd + h * d + e];
  grouped[i] = sum;
}

}  // namespace

void rms_norm(const float* x, const float* gamma, float epsilon, int64_t rows, int64_t c, float* y, float* rstd,
              RoundOut out, cudaStream_t s) {
  if (rows == 0) return;
  rms_norm_kernel<<<blocks_for_warps(rows), kWarp * kWarpsPerBlock, 0, s>>>(x, gamma, epsilon, rows, c, y, rstd, out);
  DT_CUDA_LAUNCHED();
}

size_t rms_norm_backward_scratch(int64_t rows, int64_t c) { return column_sum_scratch_bytes<float>(rows, c); }

void rms_norm_backward(const float* x, const float* dy, const float* gamma, const float* rstd, int64_t rows, int64_t c,
                       float* dx, float* dgamma, void* scratch, cudaStream_t s) {
  if (rows == 0) return;
  column_sums<float>(rows, c, DyTimesScaled{x, dy, rstd, c}, AddTo{dgamma}, scratch, s);
  if (!dx) return;
  rms_norm_dx_kernel<<<blocks_for_warps(rows), kWarp * kWarpsPerBlock, 0, s>>>(x, dy, gamma, rstd, rows, c, dx);
  DT_CUDA_LAUNCHED();
}

void rotary(float* qkv, int64_t n, int64_t t, int64_t heads, int64_t kv_heads, int64_t d, const float* angles,
            bool inverse, cudaStream_t s) {
  const int64_t threads = n * t * (heads + kv_heads) * (d / 2);
  if (threads == 0) return;
  rotary_kernel<<<blocks_for(threads), 256, 0, s>>>(qkv, n * t, t, (heads + 2 * kv_heads) * d, heads + kv_heads, d,
                                                    angles, inverse ? -1.0f : 1.0f);
  DT_CUDA_LAUNCHED();
}

void silu(const float* x, float* y, int64_t n, RoundOut out, cudaStream_t s) {
  if (n == 0) return;
  silu_kernel<<<blocks_for(n), 256, 0, s>>>(x, y, n, out);
  DT_CUDA_LAUNCHED();
}

void silu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  silu_backward_kernel<<<blocks_for(n), 256, 0, s>>>(x, dy, dx, n);
  DT_CUDA_LAUNCHED();
}

void gated_unit(const float* h, int64_t rows, int64_t f, bool silu, float* y, RoundOut out, cudaStream_t s) {
  if (rows * f == 0) return;
  gated_kernel<<<blocks_for(rows * f), 256, 0, s>>>(h, rows, f, silu, y, out);
  DT_CUDA_LAUNCHED();
}

void gated_unit_backward(const float* h, const float* dy, int64_t rows, int64_t f, bool silu, float* dh,
                         cudaStream_t s) {
  if (rows * f == 0) return;
  gated_backward_kernel<<<blocks_for(rows * f), 256, 0, s>>>(h, dy, rows, f, silu, dh);
  DT_CUDA_LAUNCHED();
}

template <typename T>
void expand_kv(const T* grouped, int64_t rows, int64_t heads, int64_t kv_heads, int64_t d, T* wide, cudaStream_t s) {
  if (rows == 0) return;
  expand_kv_kernel<T><<<blocks_for(rows * 3 * heads * d), 256, 0, s>>>(grouped, rows, heads, kv_heads, d, wide);
  DT_CUDA_LAUNCHED();
}
template void expand_kv<float>(const float*, int64_t, int64_t, int64_t, int64_t, float*, cudaStream_t);
template void expand_kv<uint16_t>(const uint16_t*, int64_t, int64_t, int64_t, int64_t, uint16_t*, cudaStream_t);

void sum_kv(const float* wide, int64_t rows, int64_t heads, int64_t kv_heads, int64_t d, float* grouped,
            cudaStream_t s) {
  if (rows == 0) return;
  sum_kv_kernel<<<blocks_for(rows * (heads + 2 * kv_heads) * d), 256, 0, s>>>(wide, rows, heads, kv_heads, d, grouped);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
