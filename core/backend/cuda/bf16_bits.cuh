// bfloat16 bits on the GPU, bit for bit the CPU's (core/backend/cpu/cpu_bf16.hpp): rounding
// to nearest even, NaN kept NaN; and the rounding of a kernel's output (RoundOut).
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>

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

// Eight values a thread, read and written 16 bytes at a time: element-wise kernels are pure
// memory traffic, and one element a thread (2-byte stores) ran at half the bandwidth.
// Pointers 16-byte aligned; the groups of 8 are strided over the grid.
struct Floats8 {
  float v[8];
};
__device__ inline Floats8 load8(const float* p) {
  const float4 lo = reinterpret_cast<const float4*>(p)[0], hi = reinterpret_cast<const float4*>(p)[1];
  return {{lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w}};
}
__device__ inline void store8(const Floats8& f, float* p) {
  reinterpret_cast<float4*>(p)[0] = make_float4(f.v[0], f.v[1], f.v[2], f.v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(f.v[4], f.v[5], f.v[6], f.v[7]);
}
__device__ inline uint32_t bits2(float lo, float hi) {
  return static_cast<uint32_t>(to_bf16_bits(lo)) | static_cast<uint32_t>(to_bf16_bits(hi)) << 16;
}
__device__ inline uint4 to_bf16x8(const Floats8& f) {
  return make_uint4(bits2(f.v[0], f.v[1]), bits2(f.v[2], f.v[3]), bits2(f.v[4], f.v[5]), bits2(f.v[6], f.v[7]));
}
__device__ inline Floats8 from_bf16x8(uint4 b) {
  const uint32_t w[4] = {b.x, b.y, b.z, b.w};
  Floats8 f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f.v[2 * i] = __uint_as_float(w[i] << 16);
    f.v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
  return f;
}

__device__ inline int64_t first_group() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t group_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Blocks of 256 threads for `groups` groups of 8, at most 2^16 (the kernels stride).
inline unsigned grid_for_groups(int64_t groups) {
  return static_cast<unsigned>(std::min<int64_t>((groups + 255) / 256, int64_t{1} << 16));
}
// Whether an element-wise kernel can take 8 values a thread: whole groups of 8, every
// buffer 16-byte aligned (packed may be null).
inline bool by_eights(int64_t n, std::initializer_list<const void*> buffers) {
  if (n % 8 != 0) return false;
  for (const void* p : buffers)
    if (p && !aligned16(p)) return false;
  return true;
}

// The eight values of group g as `out` asks (rounded_output, eight at a time).
__device__ inline Floats8 rounded_output8(const Floats8& v, RoundOut out, int64_t g) {
  if (!out.round) return v;
  const uint4 bits = to_bf16x8(v);
  if (out.packed) reinterpret_cast<uint4*>(out.packed)[g] = bits;
  return from_bf16x8(bits);
}

}  // namespace distrain::cuda
