// The CPU backend's rotary position embeddings (Backend::rotary): each row of queries and
// keys turned in place, rows in parallel; the same arithmetic whatever the thread count.
#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_vector_math.hpp"

namespace distrain {

namespace {

// The `count` heads of D from x turned by the angles of one position (cos, sin: D/2 each);
// sign -1 turns back.
DT_VECTOR_CLONES void rotate_heads(float* x, int64_t count, int64_t d, const float* cos, const float* sin, float sign) {
  const int64_t half = d / 2;
  for (int64_t h = 0; h < count; ++h) {
    float* a = x + h * d;
    float* b = a + half;
#pragma omp simd
    for (int64_t e = 0; e < half; ++e) {
      const float x1 = a[e], x2 = b[e], s = sign * sin[e];
      a[e] = x1 * cos[e] - x2 * s;
      b[e] = x2 * cos[e] + x1 * s;
    }
  }
}

}  // namespace

void CpuBackend::rotary(Tensor qkv, int64_t heads, int64_t kv_heads, const Tensor& angles, bool inverse) {
  const int64_t n = qkv.shape[0], t = qkv.shape[1], width = qkv.shape[2], d = width / (heads + 2 * kv_heads);
  DT_CHECK(qkv.shape.rank() == 3 && width == (heads + 2 * kv_heads) * d && d % 2 == 0 && angles.numel() == t * d,
           "rotary embedding of {} with {} heads, {} key/value heads and angles {}", qkv.shape.str(), heads, kv_heads,
           angles.shape.str());
  float* p = qkv.f32();
  const float* cos = angles.f32();
  const float* sin = cos + t * d / 2;
  const float sign = inverse ? -1.0f : 1.0f;
#pragma omp parallel for if (n * t > kParallelRows)
  for (int64_t row = 0; row < n * t; ++row) {
    const int64_t position = row % t;
    rotate_heads(p + row * width, heads + kv_heads, d, cos + position * d / 2, sin + position * d / 2, sign);
  }
}

}  // namespace distrain
