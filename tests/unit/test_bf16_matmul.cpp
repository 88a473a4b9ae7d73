// The CPU's bf16 matrix products (train.precision = "bf16") against float64 products of the
// same operands rounded to bf16 on the host: the rounding is to nearest even, the sums are
// float32's, and a product too large for one pair of operand copies, taken a slice of the
// inner dimension at a time, sums to the same. On a CPU without AVX512_BF16 or AMX the
// products are emulated (float32 copies of the rounded operands) and held to the same.
#include <cmath>
#include <cstring>

#include "core/tensor/buffer.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

// The value of x rounded to bfloat16 (nearest, ties to even), by arithmetic on the bits.
double bf16_value(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t low = u & 0xffffu, high = u >> 16;
  const uint32_t up = low > 0x8000u || (low == 0x8000u && (high & 1u)) ? high + 1 : high;
  const uint32_t bits = up << 16;
  float r = 0;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

// c (m, n) = op(a) op(b) + beta c in float64 from the bf16 values of a and b, at (i, j).
double reference(bool ta, bool tb, const std::vector<float>& a, const std::vector<float>& b, int64_t k, int64_t m,
                 int64_t n, int64_t i, int64_t j) {
  double sum = 0;
  for (int64_t p = 0; p < k; ++p) {
    const float x = ta ? a[static_cast<size_t>(p * m + i)] : a[static_cast<size_t>(i * k + p)];
    const float y = tb ? b[static_cast<size_t>(j * k + p)] : b[static_cast<size_t>(p * n + j)];
    sum += bf16_value(x) * bf16_value(y);
  }
  return sum;
}

// Checks gemm_bf16 for one shape at `samples` entries spread over c; returns the largest
// difference from float32's gemm relative to the largest |c|.
double check_product(bool ta, bool tb, float beta, int64_t m, int64_t k, int64_t n, int64_t samples) {
  Backend& be = cpu();
  const std::vector<float> a = random_vector(static_cast<size_t>(m * k), 1), b = random_vector(static_cast<size_t>(k * n), 2),
                           c0 = random_vector(static_cast<size_t>(m * n), 3);
  Buffer da(be, ta ? Shape{k, m} : Shape{m, k}), db(be, tb ? Shape{n, k} : Shape{k, n}), dc(be, Shape{m, n}),
      dc32(be, Shape{m, n});
  from_host(a, da.view());
  from_host(b, db.view());
  from_host(c0, dc.view());
  from_host(c0, dc32.view());
  be.gemm_bf16(ta, tb, da.view(), db.view(), beta, dc.view());
  be.gemm(ta, tb, 1.0f, da.view(), db.view(), beta, dc32.view());
  const std::vector<float> c = to_host(dc.view()), c32 = to_host(dc32.view());
  for (int64_t s = 0; s < samples; ++s) {
    const int64_t i = (s * 7919) % m, j = (s * 104729) % n;
    const size_t at = static_cast<size_t>(i * n + j);
    const double want = reference(ta, tb, a, b, k, m, n, i, j) + beta * c0[at];
    // float32 accumulation of k products of magnitude <= 1: its rounding grows like k eps.
    CHECK(std::abs(c[at] - want) <= 4e-7 * static_cast<double>(k) + 1e-6);
  }
  double diff = 0, scale = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(c[i] - c32[i])));
    scale = std::max(scale, static_cast<double>(std::abs(c32[i])));
  }
  return diff / scale;
}

}  // namespace

TEST_CASE("bf16 matmul: the four transpose cases, with beta 0 and 1, are float32 sums of bf16-rounded operands") {
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const float beta : {0.0f, 1.0f}) {
        INFO("ta " << ta << " tb " << tb << " beta " << beta);
        const double off = check_product(ta, tb, beta, 37, 150, 53, 200);
        // bf16 keeps 8 bits of mantissa: off float32's by about 2^-9 of an operand.
        CHECK(off > 1e-4);
        CHECK(off < 2e-2);
      }
}

TEST_CASE("bf16 matmul: a product whose operand copies exceed one inner slice sums its slices to the same") {
  // The smallest slice's copies, (m + n) x 128 bytes, pass 32 MiB only for m + n > 262144:
  // one long, thin product.
  const int64_t m = 270000, k = 100, n = 8;
  CHECK(bf16_gemm_scratch_bytes(m, k, n) < 2 * (m + n) * k);
  check_product(false, false, 1.0f, m, k, n, 300);
  check_product(true, false, 0.0f, n, m, k, 100);  // the weight gradient's shape: k = m rows summed
}

TEST_CASE("bf16 matmul: an operand handed over already in bf16 gives the same product bit for bit") {
  Backend& be = cpu();
  const int64_t m = 29, k = 70, n = 41;
  for (const bool ta : {false, true}) {
    INFO("ta " << ta);
    Buffer a(be, ta ? Shape{k, m} : Shape{m, k}), a16(be, a.view().shape, DType::bf16), b(be, Shape{k, n}),
        b16(be, Shape{k, n}, DType::bf16), from_float(be, Shape{m, n}), from_bf16(be, Shape{m, n});
    from_host(random_vector(static_cast<size_t>(m * k), 4), a.view());
    from_host(random_vector(static_cast<size_t>(k * n), 5), b.view());
    be.rounded_bf16(a.view(), a16.view());
    be.rounded_bf16(b.view(), b16.view());
    from_host(std::vector<float>(static_cast<size_t>(m * n), 0.5f), from_float.view());
    from_host(std::vector<float>(static_cast<size_t>(m * n), 0.5f), from_bf16.view());
    be.gemm_bf16(ta, false, a.view(), b.view(), 1.0f, from_float.view());
    be.gemm_bf16(ta, false, a16.view(), b.view(), 1.0f, from_bf16.view());
    CHECK(to_host(from_float.view()) == to_host(from_bf16.view()));
    be.gemm_bf16(ta, false, a16.view(), b16.view(), 1.0f, from_bf16.view());
    be.gemm_bf16(ta, false, a.view(), b.view(), 1.0f, from_float.view());
    CHECK(to_host(from_float.view()) == to_host(from_bf16.view()));
  }
}

TEST_CASE("bf16 matmul: operands round to the nearest bf16, ties to even, NaN stays NaN") {
  Backend& be = cpu();
  // x times the 1 x 1 identity is x rounded: 1 + 2^-8 is a tie (to 1, even), 1 + 3 x 2^-8
  // one too (up to 1 + 2^-6), 1 + 2^-8 + 2^-20 above it (up to 1 + 2^-7).
  const std::vector<float> x{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -2.5f, std::nanf("")};
  const std::vector<float> want{1.0f, 1.0f + 0x1p-6f, 1.0f + 0x1p-7f, -2.5f};
  Buffer a(be, Shape{5, 1}), one(be, Shape{1, 1}), c(be, Shape{5, 1});
  from_host(x, a.view());
  from_host({1.0f}, one.view());
  be.gemm_bf16(false, false, a.view(), one.view(), 0.0f, c.view());
  const std::vector<float> got = to_host(c.view());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
  CHECK(std::isnan(got[4]));
}

// Activations kept in bf16 (core/model/activation_slots.hpp): packed to 2 bytes and back,
// or rounded in place, the same values as the products' operands, over tiles of threads.
TEST_CASE("bf16 conversions: packed and unpacked, or rounded in place, to the nearest bf16") {
  Backend& be = cpu();
  const std::vector<float> ties{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -2.5f, std::nanf("")};
  std::vector<float> x(100000);  // several tiles
  for (size_t i = 0; i < x.size(); ++i) x[i] = i < ties.size() ? ties[i] : std::sin(0.001f * static_cast<float>(i)) * 3.0f;
  Buffer values(be, Shape{static_cast<int64_t>(x.size())}), packed(be, values.shape(), DType::bf16),
      unpacked(be, values.shape());
  from_host(x, values.view());
  be.to_bf16(values.view(), packed.view());
  be.from_bf16(packed.view(), unpacked.view());
  be.to_bf16(values.view(), Tensor{});
  const std::vector<float> back = to_host(unpacked.view()), in_place = to_host(values.view());
  CHECK(packed.view().bytes() == 2 * x.size());
  CHECK(std::isnan(back[4]));
  CHECK(std::isnan(in_place[4]));
  for (size_t i = 0; i < x.size(); ++i) {
    if (i == 4) continue;
    INFO(i << ": " << x[i]);
    CHECK(back[i] == bf16_value(x[i]));
    CHECK(in_place[i] == back[i]);
  }
}

}  // namespace distrain::test
