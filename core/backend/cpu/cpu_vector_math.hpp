// Element-wise math the CPU kernels' vector loops can inline (no library calls, which keep
// a loop scalar), and the clones that let those loops use the widest vectors a CPU has.
// Functions called in a clone's loops are always_inline: a call left in a loop keeps it scalar.
#pragma once
#include <cstdint>
#include <cstring>

namespace distrain {

// A kernel compiled three times, for AVX-512, for AVX2 and for baseline x86-64; the loader
// picks by the CPU's features, as oneDNN dispatches. Without it a loop runs at SSE2's four
// lanes. (Clones by "arch=" would be picked by the CPU's model name, not its features.)
#define DT_VECTOR_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]

// e^x as 2^k e^r with |r| <= ln 2 / 2 and e^r to degree 7 (relative error below 1e-8);
// within 2 ulp of std::exp. x is clamped to [-87, 88], where 2^k stays a normal float: below
// it e^x is under 1.7e-38 (returned as that), above it float overflows anyway.
[[gnu::always_inline]] inline float vector_exp(float x) {
  x = x > 88.0f ? 88.0f : (x < -87.0f ? -87.0f : x);  // a blend (CMakeLists.txt: -fno-trapping-math)
  constexpr float kRound = 12582912.0f;  // 1.5 x 2^23: adding and subtracting rounds to an integer
  const float k = (x * 1.44269504f + kRound) - kRound;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // ln 2 in two parts (Cody-Waite)
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;  // 2^k, -126 <= k <= 127
  float two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  return p * two_k;
}

// tanh(u) = 1 - 2 / (e^2u + 1); within 2e-7 of std::tanh. Past |u| = 9, tanh is 1 in float.
[[gnu::always_inline]] inline float vector_tanh(float u) {
  const float x = 2.0f * (u > 9.0f ? 9.0f : (u < -9.0f ? -9.0f : u));
  return 1.0f - 2.0f / (vector_exp(x) + 1.0f);
}

// GPT-2's GELU, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and its slope.
inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
[[gnu::always_inline]] inline float vector_gelu(float x) {
  return 0.5f * x * (1.0f + vector_tanh(kGeluC * (x + 0.044715f * x * x * x)));
}
[[gnu::always_inline]] inline float vector_gelu_slope(float x) {
  const float t = vector_tanh(kGeluC * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
}

// SiLU, x / (1 + e^-x), and its slope s (1 + x (1 - s)) with s the sigmoid.
[[gnu::always_inline]] inline float vector_silu(float x) { return x / (1.0f + vector_exp(-x)); }
[[gnu::always_inline]] inline float vector_silu_slope(float x) {
  const float s = 1.0f / (1.0f + vector_exp(-x));
  return s * (1.0f + x * (1.0f - s));
}

}  // namespace distrain
