// bfloat16 bits on the GPU, bit for bit the CPU's (core/backend/cpu/cpu_bf16.hpp): rounding
// to nearest even, NaN kept NaN; and the rounding of a kernel's output (RoundOut).
#pragma once
#include <cstdint>

#include "core/backend/cuda/kernels.hpp"

namespace distrain::cuda {

__device__ inline uint16_t to_bf16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t nearest_even = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;  // rounding could carry a NaN into infinity
  return static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : nearest_even);
}

__device__ inline float from_bf16_bits(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

// v, the value a kernel writes at element i, as `out` asks: unchanged, or rounded to bf16
// with its bits stored at out.packed[i] where that is given.
__device__ inline float rounded_output(float v, RoundOut out, int64_t i) {
  if (!out.round) return v;
  const uint16_t bits = to_bf16_bits(v);
  if (out.packed) out.packed[i] = bits;
  return from_bf16_bits(bits);
}

}  // namespace distrain::cuda
