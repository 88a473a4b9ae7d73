// bfloat16 conversions on the GPU, bit for bit the CPU's (core/backend/cpu/cpu_bf16.hpp):
// rounding to nearest even, NaN kept NaN.
#include <algorithm>

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

// Row r of x (rows, cols) to row r of packed, whose rows are ld apart; the padding unwritten.
__global__ void pack_rows_kernel(const float* x, int64_t rows, int64_t cols, int64_t ld, uint16_t* packed) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) packed[r * ld + c] = to_bf16_bits(x[r * cols + c]);
}

}  // namespace

void pack_bf16_rows(const float* x, int64_t rows, int64_t cols, int64_t ld, uint16_t* packed, cudaStream_t s) {
  if (rows * cols == 0) return;
  if (ld == cols) return round_bf16(x, nullptr, packed, rows * cols, s);
  const dim3 grid(static_cast<unsigned>((cols + 255) / 256), static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  pack_rows_kernel<<<grid, 256, 0, s>>>(x, rows, cols, ld, packed);
  DT_CUDA_LAUNCHED();
}

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
