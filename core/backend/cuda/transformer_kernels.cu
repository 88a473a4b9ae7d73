// The transformer ops' kernels but attention (attention_kernels.cu): embedding lookup and
// its scatter-add, layer norm and GELU, each the CPU twin's formula
// (core/backend/cpu/transformer_ops.cpp).
// Nothing uses atomics: every output element is written by one thread in a fixed order,
// so results do not depend on timing. Row ops give each row to one warp (32 lanes split
// the row's columns and add their partial sums by butterfly shuffles).
#include <cub/device/device_radix_sort.cuh>

#include <cmath>

#include "core/backend/cuda/bf16_bits.cuh"
#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"
#include "core/backend/cuda/warp_rows.cuh"

namespace distrain::cuda {

namespace {

// --- embedding ---

// out (n, c) = rows id - first of table (rows, c); NaN rows for ids outside the table
// (as the loss makes a bad label NaN) unless outside_zero (a vocabulary slice).
__global__ void embedding_kernel(const float* table, const int32_t* ids, int64_t n, int64_t c, int64_t rows,
                                 int64_t first, bool outside_zero, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * c) return;
  const int64_t row = ids[i / c] - first, j = i % c;
  out[i] = row >= 0 && row < rows ? table[row * c + j] : (outside_zero ? 0.0f : nanf(""));
}

__global__ void iota_kernel(int32_t* p, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = static_cast<int32_t>(i);
}

// One block per position of the ids sorted by (id, position): the first position of each
// id's run adds the run's gradient rows into the table row in position order, the order of
// the CPU's serial loop, so both round alike.
__global__ void embedding_backward_kernel(const int32_t* sorted_ids, const int32_t* positions, int64_t n, int64_t c,
                                          int64_t rows, int64_t first, const float* dout, float* dtable) {
  const int64_t s = blockIdx.x;
  const int32_t id = sorted_ids[s];
  if (s > 0 && sorted_ids[s - 1] == id) return;
  const int64_t row = id - first;
  if (row < 0 || row >= rows) return;
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float acc = dtable[row * c + j];
    for (int64_t e = s; e < n && sorted_ids[e] == id; ++e) acc += dout[positions[e] * c + j];
    dtable[row * c + j] = acc;
  }
}

// --- layer norm ---

__global__ void layer_norm_kernel(const float* x, const float* gamma, const float* beta, float epsilon, int64_t rows,
                                  int64_t c, float* y, float* mean, float* rstd, RoundOut out) {
  const int64_t r = warp_index();
  if (r >= rows) return;
  const float* xr = x + r * c;
  double sum = 0.0;
  for (int64_t j = lane(); j < c; j += kWarp) sum += xr[j];
  const double mu = warp_sum(sum) / static_cast<double>(c);
  double squares = 0.0;
  for (int64_t j = lane(); j < c; j += kWarp) squares += (xr[j] - mu) * (xr[j] - mu);
  squares = warp_sum(squares);
  const auto m = static_cast<float>(mu);
  const auto s = static_cast<float>(1.0 / sqrt(squares / static_cast<double>(c) + epsilon));
  if (lane() == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
  for (int64_t j = lane(); j < c; j += kWarp) y[r * c + j] = rounded_output((xr[j] - m) * s * gamma[j] + beta[j], out, r * c + j);
}

__global__ void layer_norm_dx_kernel(const float* x, const float* dy, const float* gamma, const float* mean,
                                     const float* rstd, int64_t rows, int64_t c, float* dx) {
  const int64_t r = warp_index();
  if (r >= rows) return;
  const float *xr = x + r * c, *dyr = dy + r * c;
  const float m = mean[r], s = rstd[r];
  float dn_sum = 0.0f, dn_norm_sum = 0.0f;
  for (int64_t j = lane(); j < c; j += kWarp) {
    const float dn = dyr[j] * gamma[j];
    dn_sum += dn;
    dn_norm_sum += dn * (xr[j] - m) * s;
  }
  const float mean_dn = warp_sum(dn_sum) / static_cast<float>(c);
  const float mean_dn_norm = warp_sum(dn_norm_sum) / static_cast<float>(c);
  for (int64_t j = lane(); j < c; j += kWarp) {
    const float norm = (xr[j] - m) * s;
    dx[r * c + j] = (dyr[j] * gamma[j] - mean_dn - norm * mean_dn_norm) * s;
  }
}

// dgamma's summand: dy times the normalised input.
struct DyTimesNorm {
  const float *x, *dy, *mean, *rstd;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const {
    return dy[r * cols + c] * ((x[r * cols + c] - mean[r]) * rstd[r]);
  }
};

// --- GELU (GPT-2's tanh form) ---

__global__ void gelu_kernel(const float* x, float* y, int64_t n, RoundOut out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = rounded_output(gelu_of(x[i]), out, i);
}

// 8 values a thread (by_eights).
__global__ void gelu8_kernel(const float* x, float* y, int64_t groups, RoundOut out) {
  for (int64_t g = first_group(); g < groups; g += group_stride()) {
    Floats8 v = load8(x + 8 * g);
#pragma unroll
    for (int j = 0; j < 8; ++j) v.v[j] = gelu_of(v.v[j]);
    store8(rounded_output8(v, out, g), y + 8 * g);
  }
}

__global__ void gelu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  dx[i] = dy[i] * gelu_slope(x[i]);
}

}  // namespace

void embedding(const float* table, const int32_t* ids, int64_t n, int64_t c, int64_t rows, int64_t first,
               bool outside_zero, float* out, cudaStream_t s) {
  if (n * c == 0) return;
  embedding_kernel<<<blocks_for(n * c), 256, 0, s>>>(table, ids, n, c, rows, first, outside_zero, out);
  DT_CUDA_LAUNCHED();
}

size_t embedding_backward_scratch(int64_t n) {
  size_t sort_bytes = 0;
  DT_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const int32_t*>(nullptr),
                                          static_cast<int32_t*>(nullptr), static_cast<const int32_t*>(nullptr),
                                          static_cast<int32_t*>(nullptr), static_cast<int>(n)));
  return 4 * sizeof(int32_t) * static_cast<size_t>(n) + sort_bytes;
}

void embedding_backward(const int32_t* ids, int64_t n, int64_t c, int64_t rows, int64_t first, const float* dout,
                        float* dtable, void* scratch, cudaStream_t s) {
  if (n == 0) return;
  auto* positions = static_cast<int32_t*>(scratch);
  int32_t* sorted_ids = positions + n;
  int32_t* sorted_positions = sorted_ids + n;
  void* sort_scratch = positions + 4 * n;  // past the three arrays, at 16 n bytes: aligned for any n
  size_t sort_bytes = embedding_backward_scratch(n) - 4 * sizeof(int32_t) * static_cast<size_t>(n);
  iota_kernel<<<blocks_for(n), 256, 0, s>>>(positions, n);
  DT_CUDA_LAUNCHED();
  // Stable: equal ids keep their positions' order.
  DT_CUDA(cub::DeviceRadixSort::SortPairs(sort_scratch, sort_bytes, ids, sorted_ids, positions, sorted_positions,
                                          static_cast<int>(n), 0, 32, s));
  embedding_backward_kernel<<<static_cast<unsigned>(n), 256, 0, s>>>(sorted_ids, sorted_positions, n, c, rows, first,
                                                                      dout, dtable);
  DT_CUDA_LAUNCHED();
}

void layer_norm(const float* x, const float* gamma, const float* beta, float epsilon, int64_t rows, int64_t c,
                float* y, float* mean, float* rstd, RoundOut out, cudaStream_t s) {
  if (rows == 0) return;
  layer_norm_kernel<<<blocks_for_warps(rows), kWarp * kWarpsPerBlock, 0, s>>>(x, gamma, beta, epsilon, rows, c, y,
                                                                               mean, rstd, out);
  DT_CUDA_LAUNCHED();
}

size_t layer_norm_backward_scratch(int64_t rows, int64_t c) { return column_sum_scratch_bytes<float>(rows, c); }

void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                         int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta, void* scratch,
                         cudaStream_t s) {
  if (rows == 0) return;
  column_sums<float>(rows, c, DyTimesNorm{x, dy, mean, rstd, c}, AddTo{dgamma}, scratch, s);
  column_sums<float>(rows, c, MatrixColumn{dy, c}, AddTo{dbeta}, scratch, s);
  if (!dx) return;
  layer_norm_dx_kernel<<<blocks_for_warps(rows), kWarp * kWarpsPerBlock, 0, s>>>(x, dy, gamma, mean, rstd, rows, c,
                                                                                  dx);
  DT_CUDA_LAUNCHED();
}

void gelu(const float* x, float* y, int64_t n, RoundOut out, cudaStream_t s) {
  if (n == 0) return;
  if (by_eights(n, {x, y, out.packed}))
    gelu8_kernel<<<grid_for_groups(n / 8), 256, 0, s>>>(x, y, n / 8, out);
  else
    gelu_kernel<<<blocks_for(n), 256, 0, s>>>(x, y, n, out);
  DT_CUDA_LAUNCHED();
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  gelu_backward_kernel<<<blocks_for(n), 256, 0, s>>>(x, dy, dx, n);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
