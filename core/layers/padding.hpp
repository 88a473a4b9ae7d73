// Output size and padding along one axis, with TensorFlow's rules:
//   valid: out = floor((in - k) / s) + 1, no padding (out <= 0 when k > in);
//   same:  out = ceil(in / s), total padding max((out-1)*s + k - in, 0), the odd cell after.
#pragma once
#include <algorithm>
#include <cstdint>

namespace distrain {

struct Padding1D {
  int64_t out, before, after;
};

// in <= kMaxExtent, 0 < kernel, stride <= kMaxWindow (layer.hpp): inside int64 (UBSan
// found recipes with a kernel or stride near 2^63 overflowing it).
inline Padding1D pad_1d(int64_t in, int64_t kernel, int64_t stride, bool same) {
  if (!same) return {in >= kernel ? (in - kernel) / stride + 1 : 0, 0, 0};
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + kernel - in, 0);
  return {out, total / 2, total - total / 2};
}

}  // namespace distrain
