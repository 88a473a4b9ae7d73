// Whole-tensor reductions of the CPU path, run on every step over the gradient arena: the
// finite check and the sum of squares behind clip_norm. Tiles of fixed size summed in tile
// order, so results do not depend on the thread count; each tile cloned for AVX-512/AVX2.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_vector_math.hpp"

namespace distrain {

namespace {

constexpr int64_t kTile = 1 << 14;
constexpr uint32_t kExponent = 0x7f800000u;

// The largest exponent field of the tile: a float is finite unless its exponent bits are
// all ones, so this answers for every element in a branch-free loop.
DT_VECTOR_CLONES uint32_t largest_exponent(const float* p, int64_t n) {
  uint32_t top = 0;
#pragma omp simd reduction(max : top)
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    top = std::max(top, bits & kExponent);
  }
  return top;
}

DT_VECTOR_CLONES double tile_sum_of_squares(const float* p, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]) * p[i];
  return s;
}

int64_t tiles_of(int64_t n) { return (n + kTile - 1) / kTile; }

}  // namespace

bool cpu_all_finite(const float* p, int64_t n) {
  const int64_t tiles = tiles_of(n);
  uint32_t top = 0;
#pragma omp parallel for reduction(max : top) schedule(static) if (n > 4 * kTile)
  for (int64_t t = 0; t < tiles; ++t) top = std::max(top, largest_exponent(p + t * kTile, std::min(kTile, n - t * kTile)));
  return top != kExponent;
}

double cpu_sum_of_squares(const float* p, int64_t n) {
  const int64_t tiles = tiles_of(n);
  std::vector<double> partial(static_cast<size_t>(tiles));
#pragma omp parallel for schedule(static) if (n > 4 * kTile)
  for (int64_t t = 0; t < tiles; ++t) partial[static_cast<size_t>(t)] = tile_sum_of_squares(p + t * kTile, std::min(kTile, n - t * kTile));
  double s = 0.0;
  for (const double x : partial) s += x;
  return s;
}

}  // namespace distrain
