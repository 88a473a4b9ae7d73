// The transformer ops and bf16 on the CUDA backend: embedding (whole and vocabulary
// slices), layer norm, GELU (transformer_kernels.cu), causal attention (cuBLAS products
// around softmax kernels); bf16 rounding
// (bf16_kernels.cu) and bf16 matrix products through cuBLAS's tensor cores, operands
// rounded as the CPU rounds them and products accumulated in float32.
#include <cmath>

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

// Attention one example at a time: its heads' scores (heads, t, t) are cuBLAS products
// batched over the heads (a head's queries, keys and values are every 3c-th row from
// column h d: one stride apart), the softmax passes kernels between them. The workspace
// holds one example's scores in the forward, two score-sized buffers in the backward.
namespace {

struct AttentionDims {
  int64_t n, t, c, heads, d;
  int64_t scores() const { return heads * t * t; }
};

AttentionDims attention_dims(const Tensor& qkv, int64_t heads) {
  const int64_t n = qkv.shape[0], t = qkv.shape[1], c = qkv.shape[2] / 3;
  DT_CHECK(qkv.shape[2] == 3 * c && c % heads == 0, "attention over {} with {} heads", qkv.shape.str(), heads);
  return {n, t, c, heads, c / heads};
}

// One row-major operand of a product batched over heads: its first element, row stride
// and the stride from one head's matrix to the next.
struct Strided {
  const float* at;
  int64_t row, head;
};

// c = alpha op(a) op(b) for every head (row-major, as CudaBackend::gemm: swapped operands).
void head_gemm(cublasHandle_t h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, Strided a, Strided b,
               float* c, int64_t c_row, int64_t c_head, int64_t heads) {
  const float zero = 0.0f;
  DT_CUBLAS(cublasSgemmStridedBatched(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b.at,
                                      static_cast<int>(b.row), b.head, a.at, static_cast<int>(a.row), a.head, &zero, c,
                                      static_cast<int>(c_row), c_head, static_cast<int>(heads)));
}

// The example's queries, keys and values (t, d) per head, and its (t, c) rows of out-like tensors.
struct ExampleViews {
  Strided q, k, v;
  int64_t first_row;  // the example's first row among the batch's (n h t) rows
};
ExampleViews example_views(const float* qkv, const AttentionDims& a, int64_t example) {
  const float* base = qkv + example * a.t * 3 * a.c;
  return {Strided{base, 3 * a.c, a.d}, Strided{base + a.c, 3 * a.c, a.d}, Strided{base + 2 * a.c, 3 * a.c, a.d},
          example * a.heads * a.t};
}

}  // namespace

void CudaBackend::attention(const Tensor& qkv, int64_t heads, float rate, uint64_t seed, Tensor out, Tensor lse) {
  auto lock = enter();
  const AttentionDims a = attention_dims(qkv, heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.d));
  auto* scores = static_cast<float*>(workspace(sizeof(float) * static_cast<size_t>(a.scores())));
  DT_CUBLAS(cublasSetMathMode(cublas_, allow_tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  for (int64_t e = 0; e < a.n; ++e) {
    const ExampleViews x = example_views(qkv.f32(), a, e);
    head_gemm(cublas_, false, true, a.t, a.t, a.d, scale, x.q, x.k, scores, a.t, a.t * a.t, heads);
    cuda::attention_softmax(scores, heads, a.t, x.first_row, rate, seed, lse.f32() + x.first_row, stream_);
    head_gemm(cublas_, false, false, a.t, a.d, a.t, 1.0f, Strided{scores, a.t, a.t * a.t}, x.v,
              out.f32() + e * a.t * a.c, a.c, a.d, heads);
  }
}

void CudaBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                                     int64_t heads, float rate, uint64_t seed, Tensor dqkv) {
  auto lock = enter();
  const AttentionDims a = attention_dims(qkv, heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(a.d));
  auto* p = static_cast<float*>(workspace(2 * sizeof(float) * static_cast<size_t>(a.scores())));
  float* other = p + a.scores();  // p keep, then dp
  const Strided p_heads{p, a.t, a.t * a.t}, other_heads{other, a.t, a.t * a.t};
  DT_CUBLAS(cublasSetMathMode(cublas_, allow_tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  for (int64_t e = 0; e < a.n; ++e) {
    const ExampleViews x = example_views(qkv.f32(), a, e);
    const float* out_e = out.f32() + e * a.t * a.c;
    const float* dout_e = dout.f32() + e * a.t * a.c;
    const Strided dout_heads{dout_e, a.c, a.d};
    float* dq = dqkv.f32() + e * a.t * 3 * a.c;
    head_gemm(cublas_, false, true, a.t, a.t, a.d, scale, x.q, x.k, p, a.t, a.t * a.t, heads);
    cuda::attention_probabilities(p, lse.f32() + x.first_row, heads, a.t, x.first_row, rate, seed, other, stream_);
    head_gemm(cublas_, true, false, a.t, a.d, a.t, 1.0f, other_heads, dout_heads, dq + 2 * a.c, 3 * a.c, a.d, heads);
    head_gemm(cublas_, false, true, a.t, a.t, a.d, 1.0f, dout_heads, x.v, other, a.t, a.t * a.t, heads);
    cuda::attention_score_grad(p, other, out_e, dout_e, heads, a.t, a.c, x.first_row, scale, rate, seed, stream_);
    head_gemm(cublas_, false, false, a.t, a.d, a.t, 1.0f, p_heads, x.k, dq, 3 * a.c, a.d, heads);
    head_gemm(cublas_, true, false, a.t, a.d, a.t, 1.0f, p_heads, x.q, dq + a.c, 3 * a.c, a.d, heads);
  }
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
    cuda::pack_bf16(x.f32(), bf16_data(y), x.numel(), stream_);
}

void CudaBackend::from_bf16(const Tensor& x, Tensor y) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::unpack_bf16(bf16_data(x), y.f32(), x.numel(), stream_);
}

// Both operands packed to bf16 in the workspace (a at its start, b 16-byte aligned after
// it), then one cuBLAS product with float32 accumulation and output.
void CudaBackend::gemm_bf16(bool ta, bool tb, const Tensor& a, const Tensor& b, float beta, Tensor c) {
  auto lock = enter();
  const auto [m, k, n] = gemm_dims(ta, tb, a, b, c);
  if (m == 0 || n == 0) return;
  const int64_t a_elements = round_up(a.numel(), 8);
  auto* a16 = static_cast<uint16_t*>(workspace(sizeof(uint16_t) * static_cast<size_t>(a_elements + b.numel())));
  uint16_t* b16 = a16 + a_elements;
  cuda::pack_bf16(a.f32(), a16, a.numel(), stream_);
  cuda::pack_bf16(b.f32(), b16, b.numel(), stream_);
  const float one = 1.0f;
  DT_CUBLAS(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  DT_CUBLAS(cublasGemmEx(cublas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                         static_cast<int>(m), static_cast<int>(k), &one, b16, CUDA_R_16BF, static_cast<int>(b.shape[1]),
                         a16, CUDA_R_16BF, static_cast<int>(a.shape[1]), &beta, c.f32(), CUDA_R_32F,
                         static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace distrain
