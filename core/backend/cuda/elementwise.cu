// Element-wise kernels, losses, bias gradients and the fused optimizer updates; one
// thread per element (per example for the losses: K is a class count).
#include <cmath>

#include "core/backend/cuda/bf16_bits.cuh"
#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"
#include "core/base/rng.hpp"

namespace distrain::cuda {

namespace {

__device__ int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }

__global__ void fill_kernel(float* p, int64_t n, float v) {
  const int64_t i = thread_index();
  if (i < n) p[i] = v;
}

// I: the index type, 32-bit where n allows (a 64-bit remainder costs many instructions).
template <typename I>
__global__ void bias_relu_kernel(float* y, const float* b, I n, I c, bool relu, RoundOut out) {
  const I i = grid_index<I>();
  if (i >= n) return;
  const float v = y[i] + (b ? b[i % c] : 0.0f);
  y[i] = rounded_output(relu && !(v > 0.0f) ? 0.0f : v, out, i);
}

// add_bias 8 values a thread (by_eights, channels a multiple of 8).
__global__ void bias8_kernel(float* y, const float* b, int64_t groups, int64_t channel_groups, RoundOut out) {
  for (int64_t g = first_group(); g < groups; g += group_stride()) {
    Floats8 v = load8(y + 8 * g);
    const Floats8 bias = load8(b + 8 * (g % channel_groups));
#pragma unroll
    for (int j = 0; j < 8; ++j) v.v[j] += bias.v[j];
    store8(rounded_output8(v, out, g), y + 8 * g);
  }
}

template <typename I>
__global__ void add_kernel(const float* a, const float* b, float* y, I n, RoundOut out) {
  const I i = grid_index<I>();
  if (i < n) y[i] = rounded_output(a[i] + b[i], out, i);
}

// One thread per value of the output; I: 32-bit indices where the batch allows.
template <typename I, typename Src, typename Dst>
__global__ void gather_rows_kernel(const Src* table, const int32_t* rows, I total, I width, Dst* out) {
  const I i = grid_index<I>();
  if (i >= total) return;
  const I r = i / width, j = i % width;
  out[i] = static_cast<Dst>(table[static_cast<int64_t>(rows[r]) * width + j]);
}

__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  const int64_t i = thread_index();
  if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void relu_backward_kernel(const float* y, const float* dy, float* dx, int64_t n) {
  const int64_t i = thread_index();
  if (i < n) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void scale_shift_kernel(const float* x, float* y, int64_t n, float scale, float shift) {
  const int64_t i = thread_index();
  if (i < n) y[i] = x[i] * scale + shift;
}

__global__ void axpby_kernel(float a, const float* x, float b, float* y, int64_t n) {
  const int64_t i = thread_index();
  if (i < n) y[i] = a * x[i] + b * y[i];
}

__global__ void dropout_kernel(const float* x, float* y, int64_t n, float rate, float keep_scale, uint64_t seed) {
  const int64_t i = thread_index();
  if (i < n) y[i] = uniform_at(seed, static_cast<uint64_t>(i)) >= rate ? x[i] * keep_scale : 0.0f;
}

__device__ int64_t argmax_of(const float* row, int64_t k) {
  int64_t arg = 0;
  for (int64_t j = 1; j < k; ++j)
    if (row[j] > row[arg]) arg = j;  // strict: the first maximum, as std::max_element
  return arg;
}

// The formulas of the CPU twin, in double where it uses double.
__global__ void cross_entropy_kernel(const float* z, const int32_t* y, int64_t n, int64_t k, bool from_logits,
                                     float grad_scale, float* dz, double* loss, int* correct) {
  const int64_t i = thread_index();
  if (i >= n) return;
  const float* row = z + i * k;
  const int32_t label = y[i];
  const int64_t arg = argmax_of(row, k);
  correct[i] = arg == label;
  if (label < 0 || label >= k) {
    loss[i] = nan("");
    return;
  }
  if (from_logits) {
    const float m = row[arg];
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(row[j] - m));
    const double lse = m + log(sum);
    loss[i] = lse - row[label];
    if (dz)
      for (int64_t j = 0; j < k; ++j) dz[i * k + j] = static_cast<float>((exp(row[j] - lse) - (j == label)) * grad_scale);
  } else {
    const double eps = static_cast<double>(1e-7f);  // Keras' clipping of probabilities, the CPU's float constant
    double s = 0.0;
    for (int64_t j = 0; j < k; ++j) s += row[j];
    const double q = row[label] / s;
    const double qc = fmin(fmax(q, eps), 1.0 - eps);
    loss[i] = -log(qc);
    if (dz) {
      const bool clipped = q != qc;
      for (int64_t j = 0; j < k; ++j) {
        const double g = clipped ? 0.0 : (1.0 / s - (j == label ? 1.0 / row[label] : 0.0));
        dz[i * k + j] = static_cast<float>(g * grad_scale);
      }
    }
  }
}

// The same from logits with one block per example, for vocabularies: tens of thousands of
// classes read by a block's threads side by side, not by one thread alone. Each thread keeps
// a running maximum (the first, as argmax_of), and its sum of exponentials rescaled as the
// maximum grows, so a row is read once for the loss and once more for the gradient; float
// exponentials (double ones made this the slowest kernel of GPT-2's step). Partial results
// combine in a fixed tree, so the sums are deterministic.
constexpr int kRowThreads = 256;
struct RowPartial {
  float max;
  int64_t at;
  double sum;  // of exp(z - max)
};
__device__ RowPartial combined(const RowPartial& a, const RowPartial& b) {
  const bool b_first = b.max > a.max || (b.max == a.max && b.at < a.at);
  const float m = b_first ? b.max : a.max;
  return {m, b_first ? b.at : a.at, a.sum * exp(static_cast<double>(a.max - m)) + b.sum * exp(static_cast<double>(b.max - m))};
}
__global__ void cross_entropy_rows_kernel(const float* z, const int32_t* y, int64_t k, float grad_scale, float* dz,
                                          double* loss, int* correct) {
  const int64_t i = blockIdx.x;
  const float* row = z + i * k;
  const int tid = static_cast<int>(threadIdx.x);
  __shared__ RowPartial part[kRowThreads];
  float m = row[tid], sum = 1.0f;  // k >= kRowThreads: every thread has a first column
  int64_t at = tid;
  for (int64_t j = tid + kRowThreads; j < k; j += kRowThreads) {
    const float v = row[j];
    if (v > m) {
      sum = sum * expf(m - v) + 1.0f;
      m = v;
      at = j;
    } else {
      sum += expf(v - m);
    }
  }
  part[tid] = {m, at, sum};
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half /= 2) {
    if (tid < half) part[tid] = combined(part[tid], part[tid + half]);
    __syncthreads();
  }
  const double lse = part[0].max + log(part[0].sum);
  const int32_t label = y[i];
  const bool known = label >= 0 && label < k;
  if (tid == 0) {
    correct[i] = part[0].at == label;
    loss[i] = known ? lse - row[label] : nan("");
  }
  if (!dz || !known) return;
  const auto lse_f = static_cast<float>(lse);
  for (int64_t j = tid; j < k; j += kRowThreads) dz[i * k + j] = (expf(row[j] - lse_f) - (j == label)) * grad_scale;
}

__global__ void squared_error_kernel(const float* p, const int32_t* y, int64_t n, int64_t k, float grad_scale,
                                     float* dp, double* loss, int* correct) {
  const int64_t i = thread_index();
  if (i >= n) return;
  const float* row = p + i * k;
  const int32_t label = y[i];
  correct[i] = argmax_of(row, k) == label;
  if (label < 0 || label >= k) {
    loss[i] = nan("");
    return;
  }
  double l = 0.0;
  for (int64_t j = 0; j < k; ++j) {
    const double diff = row[j] - (j == label ? 1.0 : 0.0);
    l += diff * diff;
    if (dp) dp[i * k + j] = static_cast<float>(2.0 * diff / static_cast<double>(k) * grad_scale);
  }
  loss[i] = l / static_cast<double>(k);
}

// stats = {sum of loss, sum of correct}: one block, a fixed summation order.
constexpr int kStatsThreads = 256;
__global__ void loss_stats_kernel(const double* loss, const int* correct, int64_t n, float* stats) {
  __shared__ double l[kStatsThreads];
  __shared__ long long c[kStatsThreads];
  double ls = 0.0;
  long long cs = 0;
  for (int64_t i = threadIdx.x; i < n; i += kStatsThreads) {
    ls += loss[i];
    cs += correct[i];
  }
  l[threadIdx.x] = ls;
  c[threadIdx.x] = cs;
  __syncthreads();
  for (int half = kStatsThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      l[threadIdx.x] += l[threadIdx.x + half];
      c[threadIdx.x] += c[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    stats[0] = static_cast<float>(l[0]);
    stats[1] = static_cast<float>(c[0]);
  }
}

__global__ void sgd_kernel(float* p, const float* g, float* m, int64_t n, float lr, float decay, float momentum,
                           bool nesterov) {
  const int64_t i = thread_index();
  if (i >= n) return;
  float w = p[i] - p[i] * decay;
  if (m) {
    m[i] = momentum * m[i] - lr * g[i];
    w += nesterov ? momentum * m[i] - lr * g[i] : m[i];
  } else {
    w -= lr * g[i];
  }
  p[i] = w;
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float alpha, float decay, float b1,
                            float b2, float eps) {
  const int64_t i = thread_index();
  if (i >= n) return;
  const float w = p[i] - p[i] * decay;
  const float gi = g[i];
  const float mi = m[i] + (gi - m[i]) * b1;
  const float vi = v[i] + (gi * gi - v[i]) * b2;
  m[i] = mi;
  v[i] = vi;
  p[i] = w - alpha * mi / (sqrtf(vi) + eps);
}

}  // namespace

void fill(float* p, int64_t n, float value, cudaStream_t s) {
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), 256, 0, s>>>(p, n, value);
  DT_CUDA_LAUNCHED();
}

namespace {
void launch_bias_relu(float* y, const float* bias, int64_t n, int64_t channels, bool relu, RoundOut out, cudaStream_t s) {
  if (n == 0) return;
  if (n < kMaxInt32Index)
    bias_relu_kernel<int32_t><<<blocks_for(n), 256, 0, s>>>(y, bias, static_cast<int32_t>(n),
                                                            static_cast<int32_t>(channels), relu, out);
  else
    bias_relu_kernel<int64_t><<<blocks_for(n), 256, 0, s>>>(y, bias, n, channels, relu, out);
  DT_CUDA_LAUNCHED();
}
}  // namespace

void add_bias(float* y, const float* bias, int64_t n, int64_t channels, RoundOut out, cudaStream_t s) {
  if (n > 0 && channels % 8 == 0 && by_eights(n, {y, bias, out.packed})) {
    bias8_kernel<<<grid_for_groups(n / 8), 256, 0, s>>>(y, bias, n / 8, channels / 8, out);
    DT_CUDA_LAUNCHED();
    return;
  }
  launch_bias_relu(y, bias, n, channels, false, out, s);
}

void bias_relu(float* y, const float* bias, int64_t n, int64_t channels, bool relu, cudaStream_t s) {
  launch_bias_relu(y, bias, n, channels, relu, RoundOut{}, s);
}

void add(const float* a, const float* b, float* y, int64_t n, RoundOut out, cudaStream_t s) {
  if (n == 0) return;
  if (n < kMaxInt32Index)
    add_kernel<int32_t><<<blocks_for(n), 256, 0, s>>>(a, b, y, static_cast<int32_t>(n), out);
  else
    add_kernel<int64_t><<<blocks_for(n), 256, 0, s>>>(a, b, y, n, out);
  DT_CUDA_LAUNCHED();
}

template <typename Src, typename Dst>
void launch_gather(const Src* table, const int32_t* rows, int64_t n, int64_t width, Dst* out, cudaStream_t s) {
  const int64_t total = n * width;
  if (total == 0) return;
  if (total < kMaxInt32Index)
    gather_rows_kernel<int32_t><<<blocks_for(total), 256, 0, s>>>(table, rows, static_cast<int32_t>(total),
                                                               static_cast<int32_t>(width), out);
  else
    gather_rows_kernel<int64_t><<<blocks_for(total), 256, 0, s>>>(table, rows, total, width, out);
  DT_CUDA_LAUNCHED();
}

void gather_rows(const uint8_t* table, const int32_t* rows, int64_t n, int64_t width, float* out, cudaStream_t s) {
  launch_gather(table, rows, n, width, out, s);
}
void gather_rows(const float* table, const int32_t* rows, int64_t n, int64_t width, float* out, cudaStream_t s) {
  launch_gather(table, rows, n, width, out, s);
}
void gather_rows(const int32_t* table, const int32_t* rows, int64_t n, int64_t width, int32_t* out, cudaStream_t s) {
  launch_gather(table, rows, n, width, out, s);
}

void relu(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  relu_kernel<<<blocks_for(n), 256, 0, s>>>(x, y, n);
  DT_CUDA_LAUNCHED();
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  relu_backward_kernel<<<blocks_for(n), 256, 0, s>>>(y, dy, dx, n);
  DT_CUDA_LAUNCHED();
}

void scale_shift(const float* x, float* y, int64_t n, float scale, float shift, cudaStream_t s) {
  if (n == 0) return;
  scale_shift_kernel<<<blocks_for(n), 256, 0, s>>>(x, y, n, scale, shift);
  DT_CUDA_LAUNCHED();
}

void axpby(float a, const float* x, float b, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  axpby_kernel<<<blocks_for(n), 256, 0, s>>>(a, x, b, y, n);
  DT_CUDA_LAUNCHED();
}

void dropout(const float* x, float* y, int64_t n, float rate, uint64_t seed, cudaStream_t s) {
  if (n == 0) return;
  dropout_kernel<<<blocks_for(n), 256, 0, s>>>(x, y, n, rate, 1.0f / (1.0f - rate), seed);
  DT_CUDA_LAUNCHED();
}

size_t column_sum_scratch(int64_t rows, int64_t cols) { return column_sum_scratch_bytes<double>(rows, cols); }

void bias_grad(const float* dy, int64_t rows, int64_t cols, float* dbias, void* scratch, cudaStream_t s) {
  if (rows == 0) return;
  column_sums<float>(rows, cols, MatrixColumn{dy, cols}, AddTo{dbias}, scratch, s);
}

size_t loss_scratch(int64_t n) { return static_cast<size_t>(n) * (sizeof(double) + sizeof(int)); }

void cross_entropy(const float* z, const int32_t* labels, int64_t n, int64_t k, bool from_logits, float grad_scale,
                   float* dz, float* stats, void* scratch, cudaStream_t s) {
  auto* loss = static_cast<double*>(scratch);
  auto* correct = reinterpret_cast<int*>(loss + n);
  if (n > 0 && from_logits && k >= kRowThreads) {
    cross_entropy_rows_kernel<<<static_cast<unsigned>(n), kRowThreads, 0, s>>>(z, labels, k, grad_scale, dz, loss,
                                                                                correct);
    DT_CUDA_LAUNCHED();
  } else if (n > 0) {
    cross_entropy_kernel<<<blocks_for(n), 256, 0, s>>>(z, labels, n, k, from_logits, grad_scale, dz, loss, correct);
    DT_CUDA_LAUNCHED();
  }
  loss_stats_kernel<<<1, kStatsThreads, 0, s>>>(loss, correct, n, stats);
  DT_CUDA_LAUNCHED();
}

void squared_error(const float* p, const int32_t* labels, int64_t n, int64_t k, float grad_scale, float* dp,
                   float* stats, void* scratch, cudaStream_t s) {
  auto* loss = static_cast<double*>(scratch);
  auto* correct = reinterpret_cast<int*>(loss + n);
  if (n > 0) {
    squared_error_kernel<<<blocks_for(n), 256, 0, s>>>(p, labels, n, k, grad_scale, dp, loss, correct);
    DT_CUDA_LAUNCHED();
  }
  loss_stats_kernel<<<1, kStatsThreads, 0, s>>>(loss, correct, n, stats);
  DT_CUDA_LAUNCHED();
}

void sgd(float* param, const float* grad, float* velocity, int64_t n, float lr, float decay, float momentum,
         bool nesterov, cudaStream_t s) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n), 256, 0, s>>>(param, grad, velocity, n, lr, decay, momentum, nesterov);
  DT_CUDA_LAUNCHED();
}

void adam(float* param, const float* grad, float* m, float* v, int64_t n, float alpha, float decay, float one_minus_b1,
          float one_minus_b2, float epsilon, cudaStream_t s) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n), 256, 0, s>>>(param, grad, m, v, n, alpha, decay, one_minus_b1, one_minus_b2, epsilon);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
