// What the row kernels share (layer norm, RMS norm): each row given to one warp, whose 32
// lanes split the row's columns and add their partial sums by butterfly shuffles; and GPT-2's
// GELU with its slope, the CPU twin's formula (cpu_vector_math.hpp).
#pragma once
#include <cmath>
#include <cstdint>

namespace distrain::cuda {

constexpr int kWarp = 32, kWarpsPerBlock = 8;

template <typename T>
__device__ inline T warp_sum(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;  // the same value in every lane
}

__device__ inline int64_t warp_index() { return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp; }
__device__ inline int lane() { return static_cast<int>(threadIdx.x % kWarp); }
inline unsigned blocks_for_warps(int64_t warps) {
  return static_cast<unsigned>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
__device__ inline float gelu_of(float v) { return 0.5f * v * (1.0f + tanhf(kGeluC * (v + 0.044715f * v * v * v))); }
__device__ inline float gelu_slope(float v) {
  const float t = tanhf(kGeluC * (v + 0.044715f * v * v * v));
  return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
}

}  // namespace distrain::cuda
