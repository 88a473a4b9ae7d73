// The transformer ops and bf16 on the CUDA backend: embedding (whole and vocabulary
// slices), layer norm, GELU (transformer_kernels.cu), causal attention as flash attention
// (attention_kernels.cu); bf16 rounding (bf16_kernels.cu) and bf16 matrix products on
// cuBLAS's tensor cores, operands rounded as the CPU rounds them, sums in float32.
#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/cuda/cuda_check.hpp"
#include "core/backend/cuda/kernels.hpp"

namespace distrain {

namespace {

uint16_t* bf16_data(const Tensor& t) {
  DT_CHECK(t.dtype == DType::bf16, "expected a bf16 tensor, got {}", dtype_name(t.dtype));
  return static_cast<uint16_t*>(t.data);
}

int64_t round_up(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

}  // namespace

// Ids outside the table give NaN rows: the CPU refuses them, the GPU cannot without
// waiting for the ids, so the loss says so instead.
void CudaBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
  auto lock = enter();
  const int64_t c = table.shape[1], n = ids.numel();
  DT_CHECK(out.numel() == n * c, "embedding of {} ids into {}", n, out.shape.str());
  cuda::embedding(table.f32(), ids.i32(), n, c, table.shape[0], 0, false, out.f32(), stream_);
}

void CudaBackend::embedding_backward(const Tensor& ids, const Tensor& dout, Tensor dtable) {
  embedding_slice_backward(ids, 0, dout, dtable);
}

void CudaBackend::embedding_slice(const Tensor& table, const Tensor& ids, int64_t first, Tensor out) {
  auto lock = enter();
  const int64_t c = table.shape[1], n = ids.numel();
  DT_CHECK(out.numel() == n * c, "embedding of {} ids into {}", n, out.shape.str());
  cuda::embedding(table.f32(), ids.i32(), n, c, table.shape[0], first, true, out.f32(), stream_);
}

void CudaBackend::embedding_slice_backward(const Tensor& ids, int64_t first, const Tensor& dout, Tensor dtable) {
  auto lock = enter();
  const int64_t c = dtable.shape[1], n = ids.numel();
  DT_CHECK(dout.numel() == n * c, "embedding gradient of {} ids from {}", n, dout.shape.str());
  cuda::embedding_backward(ids.i32(), n, c, dtable.shape[0], first, dout.f32(), dtable.f32(),
                           workspace(cuda::embedding_backward_scratch(n)), stream_);
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float epsilon, Tensor y,
                             Tensor mean, Tensor rstd) {
  auto lock = enter();
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  check_same_numel(x, y);
  cuda::layer_norm(x.f32(), gamma.f32(), beta.f32(), epsilon, rows, c, y.f32(), mean.f32(), rstd.f32(), stream_);
}

void CudaBackend::layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                      const Tensor& rstd, Tensor dx, Tensor dgamma, Tensor dbeta) {
  auto lock = enter();
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  cuda::layer_norm_backward(x.f32(), dy.f32(), gamma.f32(), mean.f32(), rstd.f32(), rows, c,
                            dx.empty() ? nullptr : dx.f32(), dgamma.f32(), dbeta.f32(),
                            workspace(cuda::layer_norm_backward_scratch(rows, c)), stream_);
}

void CudaBackend::gelu(const Tensor& x, Tensor y) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::gelu(x.f32(), y.f32(), x.numel(), stream_);
}

void CudaBackend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) {
  auto lock = enter();
  check_same_numel(x, dx);
  cuda::gelu_backward(x.f32(), dy.f32(), dx.f32(), x.numel(), stream_);
}

namespace {
struct AttentionDims {
  int64_t n, t, c;
};
AttentionDims attention_dims(const Tensor& qkv, int64_t heads) {
  const int64_t n = qkv.shape[0], t = qkv.shape[1], c = qkv.shape[2] / 3;
  DT_CHECK(qkv.shape[2] == 3 * c && c % heads == 0, "attention over {} with {} heads", qkv.shape.str(), heads);
  if (c / heads > cuda::kMaxHeadDim)
    throw UserError(fmt::format("attention: heads of {} features on a GPU (at most {}); use more heads", c / heads,
                                cuda::kMaxHeadDim));
  return {n, t, c};
}
}  // namespace

void CudaBackend::attention(const Tensor& qkv, int64_t heads, DType operands, float rate, uint64_t seed, Tensor out,
                            Tensor lse) {
  auto lock = enter();
  const auto [n, t, c] = attention_dims(qkv, heads);
  cuda::attention(qkv.f32(), n, heads, t, c, operands == DType::bf16, rate, seed, out.f32(), lse.f32(), stream_);
}

void CudaBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                                     int64_t heads, DType operands, float rate, uint64_t seed, Tensor dqkv) {
  auto lock = enter();
  const auto [n, t, c] = attention_dims(qkv, heads);
  cuda::attention_backward(qkv.f32(), out.f32(), lse.f32(), dout.f32(), n, heads, t, c, operands == DType::bf16, rate,
                           seed, dqkv.f32(), workspace(cuda::attention_backward_scratch(n, heads, t)), stream_);
}

std::string CudaBackend::bf16_matmul_unavailable() const { return ""; }

void CudaBackend::to_bf16(Tensor x, Tensor packed) {
  auto lock = enter();
  if (!packed.empty()) check_same_numel(x, packed);
  cuda::round_bf16(x.f32(), x.f32(), packed.empty() ? nullptr : bf16_data(packed), x.numel(), stream_);
}

void CudaBackend::rounded_bf16(const Tensor& x, Tensor y) {
  auto lock = enter();
  check_same_numel(x, y);
  if (y.dtype == DType::f32)
    cuda::round_bf16(x.f32(), y.f32(), nullptr, x.numel(), stream_);
  else
    cuda::round_bf16(x.f32(), nullptr, bf16_data(y), x.numel(), stream_);
}

void CudaBackend::from_bf16(const Tensor& x, Tensor y) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::unpack_bf16(bf16_data(x), y.f32(), x.numel(), stream_);
}

// Both operands packed to bf16 in the workspace (a at its start, b after it), each row
// starting at a 16-byte boundary: cuBLAS's tensor-core kernels want that, and without it
// (GPT-2's 50,257 logits a row) take far slower ones. Then one cuBLAS product with float32
// accumulation and output.
void CudaBackend::gemm_bf16(bool ta, bool tb, const Tensor& a, const Tensor& b, float beta, Tensor c) {
  auto lock = enter();
  const auto [m, k, n] = gemm_dims(ta, tb, a, b, c);
  if (m == 0 || n == 0) return;
  const int64_t lda = round_up(a.shape[1], 8), ldb = round_up(b.shape[1], 8);
  const int64_t a_elements = a.shape[0] * lda;
  auto* a16 = static_cast<uint16_t*>(workspace(sizeof(uint16_t) * static_cast<size_t>(a_elements + b.shape[0] * ldb)));
  uint16_t* b16 = a16 + a_elements;
  cuda::pack_bf16_rows(a.f32(), a.shape[0], a.shape[1], lda, a16, stream_);
  cuda::pack_bf16_rows(b.f32(), b.shape[0], b.shape[1], ldb, b16, stream_);
  const float one = 1.0f;
  DT_CUBLAS(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  DT_CUBLAS(cublasGemmEx(cublas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                         static_cast<int>(m), static_cast<int>(k), &one, b16, CUDA_R_16BF, static_cast<int>(ldb), a16,
                         CUDA_R_16BF, static_cast<int>(lda), &beta, c.f32(), CUDA_R_32F,
                         static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace distrain
