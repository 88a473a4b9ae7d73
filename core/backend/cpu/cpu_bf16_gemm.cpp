// Matrix products with bfloat16 operands (train.precision = "bf16"): both operands are
// rounded to bf16 (round to nearest even, as the AVX512_BF16 instructions do) and the
// products accumulated in float32 by oneDNN's matmul, whose bf16 kernels need AVX512_BF16
// or AMX; elsewhere they would be a reference loop, so bf16 is refused there.
//
// The rounded copies are device Buffers (they count against strategy.device_memory),
// taken a slice of the inner dimension at a time so that a product as large as GPT-2's
// tied head (a 4096 x 50257 gradient) never holds a bf16 copy of a whole operand.
#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_bf16.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

using md = dnnl::memory;

[[gnu::target_clones("avx512f", "avx2", "default")]] void round_row(const float* __restrict src, int64_t n,
                                                                    uint16_t* __restrict dst) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16_bits(src[i]);
}

// dst (rows, cols), contiguous = the block of src (row stride ld) at (row0, col0), rounded.
void round_block(const float* src, int64_t ld, int64_t row0, int64_t col0, int64_t rows, int64_t cols, uint16_t* dst) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) round_row(src + (row0 + r) * ld + col0, cols, dst + r * cols);
}

// A (rows, cols) matrix in memory as (cols, rows) when transposed.
md::desc matrix(int64_t rows, int64_t cols, md::data_type type, bool transposed) {
  return transposed ? md::desc({rows, cols}, type, md::dims{1, rows})
                    : md::desc({rows, cols}, type, md::dims{cols, 1});
}

// The inner dimension's slice whose two bf16 copies take about kSliceBytes, in steps of 64.
constexpr int64_t kSliceBytes = int64_t{32} << 20;

int64_t inner_slice(int64_t m, int64_t k, int64_t n) {
  const int64_t fits = kSliceBytes / (2 * (m + n)) / 64 * 64;
  return std::min(k, std::max<int64_t>(64, fits));
}

}  // namespace

int64_t bf16_gemm_scratch_bytes(int64_t m, int64_t k, int64_t n) { return 2 * (m + n) * inner_slice(m, k, n); }

std::string CpuBackend::bf16_matmul_unavailable() const {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx) return "";
  return "this CPU has neither AVX512_BF16 nor AMX, which oneDNN's bf16 matrix products need (run in \"float32\")";
}

void CpuBackend::gemm_bf16(bool ta, bool tb, const Tensor& a, const Tensor& b, float beta, Tensor c) {
  const auto [m, k, n] = gemm_dims(ta, tb, a, b, c);
  const int64_t slice = inner_slice(m, k, n);
  Buffer a16(*this, Shape{m * slice}, DType::bf16), b16(*this, Shape{slice * n}, DType::bf16);
  auto* pa = static_cast<uint16_t*>(a16.view().data);
  auto* pb = static_cast<uint16_t*>(b16.view().data);
  const md::desc c_md = matrix(m, n, md::data_type::f32, false);
  dnnl::memory c_mem(c_md, engine_, c.f32());
  for (int64_t k0 = 0; k0 < k; k0 += slice) {
    const int64_t ks = std::min(slice, k - k0);
    // op(a)[:, k0:k0+ks] and op(b)[k0:k0+ks, :], each kept in its own orientation.
    if (ta) round_block(a.f32(), m, k0, 0, ks, m, pa); else round_block(a.f32(), k, 0, k0, m, ks, pa);
    if (tb) round_block(b.f32(), k, 0, k0, n, ks, pb); else round_block(b.f32(), n, k0, 0, ks, n, pb);
    const md::desc a_md = matrix(m, ks, md::data_type::bf16, ta), b_md = matrix(ks, n, md::data_type::bf16, tb);
    dnnl::post_ops accumulate;
    const float into = k0 == 0 ? beta : 1.0f;
    if (into != 0.0f) accumulate.append_sum(into);
    dnnl::primitive_attr attr;
    attr.set_post_ops(accumulate);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine_);
    dnnl::memory a_mem(a_md, engine_, pa), b_mem(b_md, engine_, pb);
    dnnl::matmul(pd).execute(stream_, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  }
  stream_.wait();
}

}  // namespace distrain
