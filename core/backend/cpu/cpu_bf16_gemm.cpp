// Matrix products with bfloat16 operands (train.precision = "bf16"): both operands are
// rounded to bf16 (round to nearest even, as the AVX512_BF16 instructions do) and the
// products accumulated in float32 by oneDNN's matmul. Its bf16 kernels need AVX512_BF16 or
// AMX (elsewhere they are a reference loop), so other CPUs emulate them: the operands are
// rounded but kept as float32, and oneDNN's float32 matmul sums the same products (in its
// own order). Emulation keeps bf16's numerics and its activation memory, not its speed.
//
// The rounded copies are device Buffers (they count against strategy.device_memory),
// taken a slice of the inner dimension at a time so that a product as large as GPT-2's
// tied head (a 4096 x 50257 gradient) never holds a rounded copy of a whole operand.
#include <algorithm>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_bf16.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

using md = dnnl::memory;

bool has_bf16_kernels() {
  static const bool has = [] {  // asked by every product; the answer is the process's
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return has;
}

// An operand copy's element: bf16 bits for the bf16 kernels, bf16 values as float32 when
// emulated; made from float32 operands (rounded) or bf16 ones (as they are).
template <class T> struct Operand;
template <> struct Operand<uint16_t> {
  static constexpr DType dtype = DType::bf16;
  static constexpr md::data_type onednn = md::data_type::bf16;
  static void round(const float* x, uint16_t* y, int64_t n) { pack_bf16(x, y, n); }
  static void round(const uint16_t* x, uint16_t* y, int64_t n) { std::copy(x, x + n, y); }
};
template <> struct Operand<float> {
  static constexpr DType dtype = DType::f32;
  static constexpr md::data_type onednn = md::data_type::f32;
  static void round(const float* x, float* y, int64_t n) { round_bf16(x, y, n); }
  static void round(const uint16_t* x, float* y, int64_t n) { unpack_bf16(x, y, n); }
};

// dst (rows, cols), contiguous = the block of src (row stride ld) at (row0, col0), rounded.
template <class T, class Src>
void round_block(const Src* src, int64_t ld, int64_t row0, int64_t col0, int64_t rows, int64_t cols, T* dst) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) Operand<T>::round(src + (row0 + r) * ld + col0, dst + r * cols, cols);
}
template <class T>
void round_block(const Tensor& src, int64_t ld, int64_t row0, int64_t col0, int64_t rows, int64_t cols, T* dst) {
  if (src.dtype == DType::bf16)
    round_block(static_cast<const uint16_t*>(src.data), ld, row0, col0, rows, cols, dst);
  else
    round_block(src.f32(), ld, row0, col0, rows, cols, dst);
}

// A (rows, cols) matrix in memory as (cols, rows) when transposed.
md::desc matrix(int64_t rows, int64_t cols, md::data_type type, bool transposed) {
  return transposed ? md::desc({rows, cols}, type, md::dims{1, rows})
                    : md::desc({rows, cols}, type, md::dims{cols, 1});
}

// The inner dimension's slice whose two operand copies take about kSliceBytes, in steps of
// 128 bytes of a row.
constexpr int64_t kSliceBytes = int64_t{32} << 20;

int64_t inner_slice(int64_t m, int64_t k, int64_t n, int64_t element_bytes) {
  const int64_t step = 128 / element_bytes;
  const int64_t fits = kSliceBytes / (element_bytes * (m + n)) / step * step;
  return std::min(k, std::max(step, fits));
}

int64_t operand_bytes() { return has_bf16_kernels() ? 2 : 4; }

// c = op(a) op(b) + beta c, from operand copies of type T, one inner slice at a time.
template <class T>
void sliced_gemm(CpuBackend& be, bool ta, bool tb, const Tensor& a, const Tensor& b, float beta, Tensor c) {
  const auto [m, k, n] = gemm_dims(ta, tb, a, b, c);
  const int64_t slice = inner_slice(m, k, n, sizeof(T));
  Buffer a_copy(be, Shape{m * slice}, Operand<T>::dtype), b_copy(be, Shape{slice * n}, Operand<T>::dtype);
  T* pa = static_cast<T*>(a_copy.view().data);
  T* pb = static_cast<T*>(b_copy.view().data);
  const dnnl::engine& engine = be.engine();
  const md::desc c_md = matrix(m, n, md::data_type::f32, false);
  dnnl::memory c_mem(c_md, engine, c.f32());
  for (int64_t k0 = 0; k0 < k; k0 += slice) {
    const int64_t ks = std::min(slice, k - k0);
    // op(a)[:, k0:k0+ks] and op(b)[k0:k0+ks, :], each kept in its own orientation.
    if (ta) round_block(a, m, k0, 0, ks, m, pa); else round_block(a, k, 0, k0, m, ks, pa);
    if (tb) round_block(b, k, 0, k0, n, ks, pb); else round_block(b, n, k0, 0, ks, n, pb);
    const md::desc a_md = matrix(m, ks, Operand<T>::onednn, ta), b_md = matrix(ks, n, Operand<T>::onednn, tb);
    dnnl::post_ops accumulate;
    const float into = k0 == 0 ? beta : 1.0f;
    if (into != 0.0f) accumulate.append_sum(into);
    dnnl::primitive_attr attr;
    attr.set_post_ops(accumulate);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
    dnnl::memory a_mem(a_md, engine, pa), b_mem(b_md, engine, pb);
    dnnl::matmul(pd).execute(be.stream(), {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  }
  be.stream().wait();
}

}  // namespace

int64_t bf16_gemm_scratch_bytes(int64_t m, int64_t k, int64_t n) {
  const int64_t bytes = operand_bytes();
  return bytes * (m + n) * inner_slice(m, k, n, bytes);
}

std::string CpuBackend::bf16_matmul_unavailable() const { return ""; }

std::string CpuBackend::bf16_matmul_emulated() const {
  if (has_bf16_kernels()) return "";
  return "this CPU has neither AVX512_BF16 nor AMX: bf16 products are emulated (operands rounded to bf16, multiplied "
         "in float32), with bf16's numerics and activation memory but slower than float32, and their operand copies are "
         "float32 (twice bf16's bytes, counted in the memory figures)";
}

void CpuBackend::gemm_bf16(bool ta, bool tb, const Tensor& a, const Tensor& b, float beta, Tensor c) {
  if (has_bf16_kernels())
    sliced_gemm<uint16_t>(*this, ta, tb, a, b, beta, c);
  else
    sliced_gemm<float>(*this, ta, tb, a, b, beta, c);
}

}  // namespace distrain
