// bfloat16 on the CPU: float32's upper 16 bits, rounded to nearest even as the AVX512_BF16
// instructions round.
#pragma once
#include <cstdint>
#include <cstring>

namespace distrain {

inline uint16_t to_bf16_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t nearest_even = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;  // rounding could carry a NaN into infinity
  return static_cast<uint16_t>(nan ? (u >> 16) | 0x40u : nearest_even);
}

inline float from_bf16_bits(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// n values, vectorised, one thread: x rounded to bf16 and packed to 2 bytes, or rounded and
// kept as float32 (x may be y), or both (x rounded in place), and packed values unpacked
// (cpu_bf16_convert.cpp).
void pack_bf16(const float* x, uint16_t* y, int64_t n);
void round_bf16(const float* x, float* y, int64_t n);
void round_pack_bf16(float* x, uint16_t* y, int64_t n);
void unpack_bf16(const uint16_t* x, float* y, int64_t n);

}  // namespace distrain
