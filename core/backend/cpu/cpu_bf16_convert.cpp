// bf16 conversions on the CPU: activations kept in bf16 (train.precision = "bf16",
// core/model/activation_slots.hpp) are rounded and packed after a layer's forward and
// unpacked to float32 when read again; bf16 products round their operands the same way.
#include <algorithm>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_bf16.hpp"
#include "core/backend/cpu/cpu_vector_math.hpp"

namespace distrain {

namespace {

constexpr int64_t kTile = 1 << 14;  // per thread at a time; below one, threads cost more than they save

template <class Tile>
void by_tiles(int64_t n, Tile tile) {
  const int64_t tiles = (n + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (tiles > 1)
  for (int64_t t = 0; t < tiles; ++t) tile(t * kTile, std::min(kTile, n - t * kTile));
}

}  // namespace

DT_VECTOR_CLONES void pack_bf16(const float* __restrict x, uint16_t* __restrict y,
                                                                    int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = to_bf16_bits(x[i]);
}

// In place allowed: each element is read before it is written.
DT_VECTOR_CLONES void round_bf16(const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = from_bf16_bits(to_bf16_bits(x[i]));
}

DT_VECTOR_CLONES void round_pack_bf16(float* __restrict x, uint16_t* __restrict y,
                                                                          int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t bits = to_bf16_bits(x[i]);
    y[i] = bits;
    x[i] = from_bf16_bits(bits);
  }
}

DT_VECTOR_CLONES void unpack_bf16(const uint16_t* __restrict x, float* __restrict y,
                                                                      int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = from_bf16_bits(x[i]);
}

void CpuBackend::to_bf16(Tensor x, Tensor packed) {
  float* px = x.f32();
  if (packed.empty()) {
    by_tiles(x.numel(), [&](int64_t at, int64_t n) { round_bf16(px + at, px + at, n); });
    return;
  }
  check_same_numel(x, packed);
  DT_CHECK(packed.dtype == DType::bf16, "to_bf16 packing into {}", dtype_name(packed.dtype));
  auto* py = static_cast<uint16_t*>(packed.data);
  by_tiles(x.numel(), [&](int64_t at, int64_t n) { round_pack_bf16(px + at, py + at, n); });
}

void CpuBackend::rounded_bf16(const Tensor& x, Tensor y) {
  check_same_numel(x, y);
  DT_CHECK(x.dtype == DType::f32 && (y.dtype == DType::f32 || y.dtype == DType::bf16), "rounded_bf16 of {} into {}",
           dtype_name(x.dtype), dtype_name(y.dtype));
  const float* px = x.f32();
  if (y.dtype == DType::f32) {
    float* py = y.f32();
    by_tiles(x.numel(), [&](int64_t at, int64_t n) { round_bf16(px + at, py + at, n); });
    return;
  }
  auto* py = static_cast<uint16_t*>(y.data);
  by_tiles(x.numel(), [&](int64_t at, int64_t n) { pack_bf16(px + at, py + at, n); });
}

void CpuBackend::from_bf16(const Tensor& x, Tensor y) {
  check_same_numel(x, y);
  DT_CHECK(x.dtype == DType::bf16, "from_bf16 of {}", dtype_name(x.dtype));
  const auto* px = static_cast<const uint16_t*>(x.data);
  float* py = y.f32();
  by_tiles(x.numel(), [&](int64_t at, int64_t n) { unpack_bf16(px + at, py + at, n); });
}

}  // namespace distrain
