// bfloat16 conversions on the GPU, bit for bit the CPU's (core/backend/cpu/cpu_bf16.hpp):
// rounding to nearest even, NaN kept NaN.
#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"

namespace distrain::cuda {

namespace {

__device__ uint16_t to_bf16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t nearest_even = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;  // rounding could carry a NaN into infinity
  return static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : nearest_even);
}

__device__ float from_bf16_bits(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

__global__ void round_kernel(const float* x, float* y, uint16_t* packed, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint16_t bits = to_bf16_bits(x[i]);
  if (packed) packed[i] = bits;
  if (y) y[i] = from_bf16_bits(bits);
}

__global__ void unpack_kernel(const uint16_t* packed, float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = from_bf16_bits(packed[i]);
}

}  // namespace

void round_bf16(const float* x, float* y, uint16_t* packed, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  round_kernel<<<blocks_for(n), 256, 0, s>>>(x, y, packed, n);
  DT_CUDA_LAUNCHED();
}

void unpack_bf16(const uint16_t* packed, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  unpack_kernel<<<blocks_for(n), 256, 0, s>>>(packed, y, n);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
