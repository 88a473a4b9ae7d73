// Batch-norm kernels over (rows, c), channels innermost, with the CPU twin's formulas:
// per-channel sums in double (deterministic, column_sums.cuh), float element-wise work.
#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"

namespace distrain::cuda {

namespace {

struct Column {
  const float* x;
  int64_t c;
  __device__ double operator()(int64_t r, int64_t k) const { return x[r * c + k]; }
};
struct SquaredDeviation {
  const float* x;
  const double* mean;
  int64_t c;
  __device__ double operator()(int64_t r, int64_t k) const {
    const double d = static_cast<double>(x[r * c + k]) - mean[k];
    return d * d;
  }
};
struct DyXhat {
  const float *x, *dy, *mean, *inv_std;
  int64_t c;
  __device__ double operator()(int64_t r, int64_t k) const {
    return static_cast<double>(dy[r * c + k]) * (x[r * c + k] - mean[k]) * inv_std[k];
  }
};
struct Store {
  double* out;
  __device__ void operator()(int64_t k, double total) const { out[k] = total; }
};

__global__ void mean_kernel(const double* sums, double count, double* mean_d, float* mean, int64_t c) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= c) return;
  mean_d[k] = sums[k] / count;
  mean[k] = static_cast<float>(mean_d[k]);
}

__global__ void variance_kernel(const double* sums, double count, float* variance, int64_t c) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < c) variance[k] = static_cast<float>(sums[k] / count);
}

__global__ void inv_std_kernel(const float* v, float eps, float* inv_std, int64_t c) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < c) inv_std[k] = 1.0f / sqrtf(v[k] + eps);
}

__global__ void normalize_kernel(const float* x, const float* g, const float* b, const float* m, const float* v,
                                 float eps, float* y, int64_t n, int64_t c) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t k = i % c;
  const float scale = g[k] / sqrtf(v[k] + eps);
  const float shift = b[k] - m[k] * scale;
  y[i] = x[i] * scale + shift;
}

__global__ void param_grads_kernel(const double* sum_dy, const double* sum_dy_xhat, float* dgamma, float* dbeta,
                                   int64_t c) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= c) return;
  dgamma[k] += static_cast<float>(sum_dy_xhat[k]);
  dbeta[k] += static_cast<float>(sum_dy[k]);
}

// dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)); the means are 0 with
// fixed (moving) statistics, which do not depend on x.
__global__ void input_grad_kernel(const float* x, const float* dy, const float* g, const float* m, const float* inv_std,
                                  const double* sum_dy, const double* sum_dy_xhat, double count, bool fixed, float* dx,
                                  int64_t n, int64_t c) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t k = i % c;
  const float scale = g[k] * inv_std[k];
  const float mean_dy = fixed ? 0.0f : static_cast<float>(sum_dy[k] / count);
  const float mean_dy_xhat = fixed ? 0.0f : static_cast<float>(sum_dy_xhat[k] / count);
  const float xhat = (x[i] - m[k]) * inv_std[k];
  dx[i] = scale * (dy[i] - mean_dy - xhat * mean_dy_xhat);
}

}  // namespace

void bn_sums(const float* x, int64_t rows, int64_t c, double* out, void* scratch, cudaStream_t s) {
  column_sums<double>(rows, c, Column{x, c}, Store{out}, scratch, s);
}

void bn_squared_deviation_sums(const float* x, const double* mean, int64_t rows, int64_t c, double* out, void* scratch,
                               cudaStream_t s) {
  column_sums<double>(rows, c, SquaredDeviation{x, mean, c}, Store{out}, scratch, s);
}

void bn_dy_xhat_sums(const float* x, const float* dy, const float* mean, const float* inv_std, int64_t rows, int64_t c,
                     double* out, void* scratch, cudaStream_t s) {
  column_sums<double>(rows, c, DyXhat{x, dy, mean, inv_std, c}, Store{out}, scratch, s);
}

void bn_mean(const double* sums, double count, double* mean_d, float* mean, int64_t c, cudaStream_t s) {
  mean_kernel<<<blocks_for(c), 256, 0, s>>>(sums, count, mean_d, mean, c);
  DT_CUDA_LAUNCHED();
}

void bn_variance(const double* sums, double count, float* variance, int64_t c, cudaStream_t s) {
  variance_kernel<<<blocks_for(c), 256, 0, s>>>(sums, count, variance, c);
  DT_CUDA_LAUNCHED();
}

void bn_inv_std(const float* variance, float epsilon, float* inv_std, int64_t c, cudaStream_t s) {
  inv_std_kernel<<<blocks_for(c), 256, 0, s>>>(variance, epsilon, inv_std, c);
  DT_CUDA_LAUNCHED();
}

void bn_normalize(const float* x, const float* gamma, const float* beta, const float* mean, const float* variance,
                  float epsilon, float* y, int64_t n, int64_t c, cudaStream_t s) {
  if (n == 0) return;
  normalize_kernel<<<blocks_for(n), 256, 0, s>>>(x, gamma, beta, mean, variance, epsilon, y, n, c);
  DT_CUDA_LAUNCHED();
}

void bn_param_grads(const double* sum_dy, const double* sum_dy_xhat, float* dgamma, float* dbeta, int64_t c,
                    cudaStream_t s) {
  param_grads_kernel<<<blocks_for(c), 256, 0, s>>>(sum_dy, sum_dy_xhat, dgamma, dbeta, c);
  DT_CUDA_LAUNCHED();
}

void bn_input_grad(const float* x, const float* dy, const float* gamma, const float* mean, const float* inv_std,
                   const double* sum_dy, const double* sum_dy_xhat, double count, bool fixed_stats, float* dx, int64_t n,
                   int64_t c, cudaStream_t s) {
  if (n == 0) return;
  input_grad_kernel<<<blocks_for(n), 256, 0, s>>>(x, dy, gamma, mean, inv_std, sum_dy, sum_dy_xhat, count, fixed_stats,
                                                  dx, n, c);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
