// A convolution's kernel and bias gradients computed directly, for kernels with few taps
// (input channels x kernel height x kernel width), such as a first layer on grey images.
#pragma once
#include <cstdint>

#include "core/backend/backend.hpp"

namespace distrain {

// At most this many taps: each position's tap values then sit in registers, and oneDNN's
// kernel gradient for such shapes ran at a sixth of the machine's SGEMM rate.
inline constexpr int64_t kMaxFewTaps = 32;

// Output channels in whole 16-lane vectors, on a CPU with AVX-512 (32 vector registers
// hold a group's sums; with AVX2's 16 they would spill, and oneDNN is left the work).
inline bool few_taps(const Conv2DSpec& s) {
  return s.in_c * s.kernel_h * s.kernel_w <= kMaxFewTaps && s.out_c % 16 == 0 && __builtin_cpu_supports("avx512f");
}

// dw (kh, kw, Cin, Cout) += sum over positions of x's taps times dy; db (Cout) += column sums
// of dy when db is not null. x (n, H, W, Cin), dy (n, OH, OW, Cout), NHWC; with relu_y (the
// shape of dy) not null, dy counts only where relu_y > 0. The sum runs over fixed blocks of
// images in a fixed order, so the result does not depend on the thread count.
void few_tap_filter_grad(const Conv2DSpec& s, int64_t n, const float* x, const float* dy, const float* relu_y,
                         float* dw, float* db);

}  // namespace distrain
