// The transformer ops' kernels: embedding lookup and its scatter-add, layer norm, GELU and
// the softmax passes of causal attention (its matrix products are cuBLAS's, in
// cuda_transformer_ops.cpp), each the CPU twin's formula (core/backend/cpu/transformer_ops.cpp).
// Nothing uses atomics: every output element is written by one thread in a fixed order,
// so results do not depend on timing. Row ops give each row to one warp (32 lanes split
// the row's columns and add their partial sums by butterfly shuffles).
#include <cub/device/device_radix_sort.cuh>

#include <cmath>

#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"
#include "core/base/rng.hpp"

namespace distrain::cuda {

namespace {

constexpr int kWarp = 32, kWarpsPerBlock = 8;
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)

template <typename T>
__device__ T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;  // the same value in every lane
}

__device__ int64_t warp_index() {
  return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
}
__device__ int lane() { return static_cast<int>(threadIdx.x % kWarp); }
unsigned blocks_for_warps(int64_t warps) { return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

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
                                  int64_t c, float* y, float* mean, float* rstd) {
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
  for (int64_t j = lane(); j < c; j += kWarp) y[r * c + j] = (xr[j] - m) * s * gamma[j] + beta[j];
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
struct DyColumn {
  const float* dy;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const { return dy[r * cols + c]; }
};
struct AddInto {
  float* out;
  __device__ void operator()(int64_t c, float total) const { out[c] += total; }
};

// --- GELU (GPT-2's tanh form) ---

__global__ void gelu_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  y[i] = 0.5f * v * (1.0f + tanhf(kGeluC * (v + 0.044715f * v * v * v)));
}

__global__ void gelu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = x[i];
  const float t = tanhf(kGeluC * (v + 0.044715f * v * v * v));
  dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * v * v));
}

// --- causal attention: the softmax passes between the matrix products ---
// One example's scores s (heads, t, t), already scaled, one warp per row (h, i); columns
// past i are the causal mask.

// The dropout mask of probability (row, j), the CPU's draw.
__device__ float keep_scale(uint64_t seed, float rate, int64_t row, int64_t t, int64_t j) {
  if (rate <= 0.0f) return 1.0f;
  return uniform_at(seed, static_cast<uint64_t>(row * t + j)) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

// s becomes the dropped-out probabilities p keep (zeros past the diagonal); lse (heads, t)
// receives each row's log-sum-exp. first_row: the example's first (n h t) row, for the mask.
__global__ void softmax_rows_kernel(float* s, int64_t heads, int64_t t, int64_t first_row, float rate, uint64_t seed,
                                    float* lse) {
  const int64_t r = warp_index();  // (h, i)
  if (r >= heads * t) return;
  const int64_t i = r % t;
  float* row = s + r * t;
  float m = -INFINITY;
  for (int64_t j = lane(); j <= i; j += kWarp) m = fmaxf(m, row[j]);
  for (int offset = kWarp / 2; offset > 0; offset /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  float sum = 0.0f;
  for (int64_t j = lane(); j <= i; j += kWarp) sum += expf(row[j] - m);
  const float row_lse = m + logf(warp_sum(sum));
  for (int64_t j = lane(); j < t; j += kWarp)
    row[j] = j <= i ? expf(row[j] - row_lse) * keep_scale(seed, rate, first_row + r, t, j) : 0.0f;
  if (lane() == 0) lse[r] = row_lse;
}

// From the recomputed scores s: p (zeros past the diagonal) into s, p keep into kept.
__global__ void probabilities_kernel(float* s, const float* lse, int64_t heads, int64_t t, int64_t first_row,
                                     float rate, uint64_t seed, float* kept) {
  const int64_t r = warp_index();
  if (r >= heads * t) return;
  const int64_t i = r % t;
  for (int64_t j = lane(); j < t; j += kWarp) {
    const float p = j <= i ? expf(s[r * t + j] - lse[r]) : 0.0f;
    s[r * t + j] = p;
    kept[r * t + j] = p * keep_scale(seed, rate, first_row + r, t, j);
  }
}

// dscore = p (dp keep - D_i) scale into p's place, D_i = dout_i . out_i; out and dout are
// the example's (t, c), head h at [h d, (h + 1) d).
__global__ void score_grad_kernel(float* p, const float* dp, const float* out, const float* dout, int64_t heads,
                                  int64_t t, int64_t c, int64_t first_row, float scale, float rate, uint64_t seed) {
  const int64_t r = warp_index();
  if (r >= heads * t) return;
  const int64_t h = r / t, i = r % t, d = c / heads;
  float partial = 0.0f;
  for (int64_t e = lane(); e < d; e += kWarp) partial += dout[i * c + h * d + e] * out[i * c + h * d + e];
  const float big_d = warp_sum(partial);
  for (int64_t j = lane(); j < t; j += kWarp) {
    const int64_t at = r * t + j;
    p[at] = j <= i ? p[at] * (dp[at] * keep_scale(seed, rate, first_row + r, t, j) - big_d) * scale : 0.0f;
  }
}

unsigned row_blocks(int64_t heads, int64_t t) { return blocks_for_warps(heads * t); }
constexpr unsigned kRowThreads = kWarp * kWarpsPerBlock;

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
  void* sort_scratch = positions + 4 * n;  // at 16 n bytes: aligned for any n
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
                float* y, float* mean, float* rstd, cudaStream_t s) {
  if (rows == 0) return;
  layer_norm_kernel<<<blocks_for_warps(rows), kWarp * kWarpsPerBlock, 0, s>>>(x, gamma, beta, epsilon, rows, c, y,
                                                                               mean, rstd);
  DT_CUDA_LAUNCHED();
}

size_t layer_norm_backward_scratch(int64_t rows, int64_t c) { return column_sum_scratch_bytes<float>(rows, c); }

void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                         int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta, void* scratch,
                         cudaStream_t s) {
  if (rows == 0) return;
  column_sums<float>(rows, c, DyTimesNorm{x, dy, mean, rstd, c}, AddInto{dgamma}, scratch, s);
  column_sums<float>(rows, c, DyColumn{dy, c}, AddInto{dbeta}, scratch, s);
  if (!dx) return;
  layer_norm_dx_kernel<<<blocks_for_warps(rows), kWarp * kWarpsPerBlock, 0, s>>>(x, dy, gamma, mean, rstd, rows, c,
                                                                                  dx);
  DT_CUDA_LAUNCHED();
}

void gelu(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  gelu_kernel<<<blocks_for(n), 256, 0, s>>>(x, y, n);
  DT_CUDA_LAUNCHED();
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  gelu_backward_kernel<<<blocks_for(n), 256, 0, s>>>(x, dy, dx, n);
  DT_CUDA_LAUNCHED();
}

void attention_softmax(float* scores, int64_t heads, int64_t t, int64_t first_row, float rate, uint64_t seed,
                       float* lse, cudaStream_t s) {
  softmax_rows_kernel<<<row_blocks(heads, t), kRowThreads, 0, s>>>(scores, heads, t, first_row, rate, seed, lse);
  DT_CUDA_LAUNCHED();
}

void attention_probabilities(float* scores, const float* lse, int64_t heads, int64_t t, int64_t first_row, float rate,
                             uint64_t seed, float* kept, cudaStream_t s) {
  probabilities_kernel<<<row_blocks(heads, t), kRowThreads, 0, s>>>(scores, lse, heads, t, first_row, rate, seed, kept);
  DT_CUDA_LAUNCHED();
}

void attention_score_grad(float* p, const float* dp, const float* out, const float* dout, int64_t heads, int64_t t,
                          int64_t c, int64_t first_row, float scale, float rate, uint64_t seed, cudaStream_t s) {
  score_grad_kernel<<<row_blocks(heads, t), kRowThreads, 0, s>>>(p, dp, out, dout, heads, t, c, first_row, scale, rate,
                                                                  seed);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
