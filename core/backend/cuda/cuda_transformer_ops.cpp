// The transformer ops and bf16 on the CUDA backend: embedding (whole and vocabulary
// slices), layer norm, GELU (transformer_kernels.cu), causal attention as flash attention
// (attention_kernels.cu); bf16 rounding (bf16_kernels.cu) and bf16 matrix products on
// cuBLAS's tensor cores, operands rounded as the CPU rounds them, sums in float32.
#include <algorithm>

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

// qkv as the attention kernels take it: float32, or packed bf16 under bf16 operands.
cuda::AttentionInput attention_input(const Tensor& qkv, bool bf16_operands) {
  if (qkv.dtype != DType::bf16) return {qkv.f32(), nullptr};
  DT_CHECK(bf16_operands, "attention on a bf16 qkv {} takes bf16 operands", qkv.shape.str());
  return {nullptr, bf16_data(qkv)};
}

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
                             Tensor mean, Tensor rstd, const OutputRounding& rounding) {
  auto lock = enter();
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  check_same_numel(x, y);
  cuda::layer_norm(x.f32(), gamma.f32(), beta.f32(), epsilon, rows, c, y.f32(), mean.f32(), rstd.f32(),
                   round_out(rounding, y), stream_);
}

void CudaBackend::layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                      const Tensor& rstd, Tensor dx, Tensor dgamma, Tensor dbeta) {
  auto lock = enter();
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  cuda::layer_norm_backward(x.f32(), dy.f32(), gamma.f32(), mean.f32(), rstd.f32(), rows, c,
                            dx.empty() ? nullptr : dx.f32(), dgamma.f32(), dbeta.f32(),
                            workspace(cuda::layer_norm_backward_scratch(rows, c)), stream_);
}

void CudaBackend::gelu(const Tensor& x, Tensor y, const OutputRounding& rounding) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::gelu(x.f32(), y.f32(), x.numel(), round_out(rounding, y), stream_);
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
// The multi-head kernels' dims of a qkv widened to 3 H d (kv_heads = heads: as it is).
AttentionDims attention_dims(const Tensor& qkv, int64_t heads, int64_t kv_heads) {
  const int64_t n = qkv.shape[0], t = qkv.shape[1], d = qkv.shape[2] / (heads + 2 * kv_heads);
  DT_CHECK(qkv.shape.rank() == 3 && kv_heads > 0 && heads % kv_heads == 0 && qkv.shape[2] == (heads + 2 * kv_heads) * d,
           "attention over {} with {} heads and {} key/value heads", qkv.shape.str(), heads, kv_heads);
  if (d > cuda::kMaxHeadDim)
    throw UserError(fmt::format("attention: heads of {} features on a GPU (at most {}); use more heads", d,
                                cuda::kMaxHeadDim));
  return {n, t, heads * d};
}

// Device memory for one op, freed in stream order when it goes.
struct StreamScratch {
  Backend& backend;
  void* p;
  StreamScratch(Backend& b, size_t bytes) : backend(b), p(b.allocate(bytes)) {}
  ~StreamScratch() { backend.deallocate(p); }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
};

// Grouped-query attention runs on the multi-head kernels: qkv with each query head's key
// and value heads copied beside it (cuda::expand_kv), in its own element type.
struct WideQkv {
  std::unique_ptr<StreamScratch> memory;
  Tensor qkv;
};
WideQkv widened(Backend& backend, const Tensor& qkv, int64_t heads, int64_t kv_heads, cudaStream_t stream) {
  if (kv_heads == heads) return {nullptr, qkv};
  const int64_t n = qkv.shape[0], t = qkv.shape[1], d = qkv.shape[2] / (heads + 2 * kv_heads);
  const Shape wide{n, t, 3 * heads * d};
  auto memory = std::make_unique<StreamScratch>(backend, static_cast<size_t>(wide.numel()) * dtype_size(qkv.dtype));
  if (qkv.dtype == DType::bf16)
    cuda::expand_kv(bf16_data(qkv), n * t, heads, kv_heads, d, static_cast<uint16_t*>(memory->p), stream);
  else
    cuda::expand_kv(qkv.f32(), n * t, heads, kv_heads, d, static_cast<float*>(memory->p), stream);
  void* p = memory->p;
  return {std::move(memory), Tensor{p, wide, qkv.dtype, qkv.device}};
}
}  // namespace

void CudaBackend::attention(const Tensor& qkv, int64_t heads, int64_t kv_heads, DType operands, float rate,
                            uint64_t seed, Tensor out, Tensor lse) {
  auto lock = enter();
  const auto [n, t, c] = attention_dims(qkv, heads, kv_heads);
  const WideQkv wide = widened(*this, qkv, heads, kv_heads, stream_);
  const bool bf16 = operands == DType::bf16;
  const cuda::AttentionInput in = attention_input(wide.qkv, bf16);
  cuda::attention(in, n, heads, t, c, bf16, rate, seed, out.f32(), lse.f32(),
                  workspace(cuda::attention_scratch(n, t, c, bf16 && !in.qkv16)), stream_);
}

void CudaBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                                     int64_t heads, int64_t kv_heads, DType operands, float rate, uint64_t seed,
                                     Tensor dqkv) {
  auto lock = enter();
  const auto [n, t, c] = attention_dims(qkv, heads, kv_heads);
  const WideQkv wide = widened(*this, qkv, heads, kv_heads, stream_);
  const bool bf16 = operands == DType::bf16;
  const cuda::AttentionInput in = attention_input(wide.qkv, bf16);
  std::unique_ptr<StreamScratch> wide_grad;
  float* grad = dqkv.f32();
  if (kv_heads != heads) {
    wide_grad = std::make_unique<StreamScratch>(*this, static_cast<size_t>(n * t * 3 * c) * sizeof(float));
    grad = static_cast<float*>(wide_grad->p);
  }
  cuda::attention_backward(in, out.f32(), lse.f32(), dout.f32(), n, heads, t, c, bf16, rate, seed, grad,
                           workspace(cuda::attention_backward_scratch(n, heads, t, c, bf16, bf16 && !in.qkv16)),
                           stream_);
  if (wide_grad) cuda::sum_kv(grad, n * t, heads, kv_heads, c / heads, dqkv.f32(), stream_);
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

namespace {

constexpr int64_t kBf16Row = 8;  // bf16 values in 16 bytes
// Where C's rows are not 16-byte aligned, the product goes to an aligned copy this large at
// most, some rows at a time.
constexpr int64_t kPaddedOutputBytes = int64_t{256} << 20;

// One gemm_bf16 operand packed to bf16, padded with zeros: rows to ld (16-byte multiples),
// and the number of rows to `rows` (a multiple of 8 where padded_rows says).
struct PackedOperand {
  int64_t rows, ld;
  int64_t elements() const { return rows * ld; }
};
PackedOperand packed_shape(const Tensor& x, bool padded_rows) {
  return {padded_rows ? round_up(x.shape[0], kBf16Row) : x.shape[0], round_up(x.shape[1], kBf16Row)};
}
// A bf16 operand already laid out as packed: read where it lies.
bool packed_already(const Tensor& x, const PackedOperand& p) {
  return x.dtype == DType::bf16 && p.rows == x.shape[0] && p.ld == x.shape[1] &&
         reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
}
// x's packed copy in `space` (float32 rounded, bf16 copied), or x itself where packed_already.
const uint16_t* packed_operand(const Tensor& x, const PackedOperand& p, uint16_t* space, cudaStream_t s) {
  if (packed_already(x, p)) return bf16_data(x);
  if (x.dtype == DType::bf16)
    cuda::pack_bf16_rows(bf16_data(x), x.shape[0], x.shape[1], p.ld, p.rows, space, s);
  else
    cuda::pack_bf16_rows(x.f32(), x.shape[0], x.shape[1], p.ld, p.rows, space, s);
  return space;
}

// Row-major C (m x n, ldc apart) = op(A) op(B) + beta C on packed operands: column-major
// C^T = op(B)^T op(A)^T, so cuBLAS gets the operands swapped.
void bf16_product(cublasHandle_t cublas, bool ta, bool tb, int64_t m, int64_t k, int64_t n, const uint16_t* a,
                  int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const float one = 1.0f;
  DT_CUBLAS(cublasGemmEx(cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                         static_cast<int>(m), static_cast<int>(k), &one, b, CUDA_R_16BF, static_cast<int>(ldb), a,
                         CUDA_R_16BF, static_cast<int>(lda), &beta, c, CUDA_R_32F, static_cast<int>(ldc),
                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

// cuBLAS's tensor-core kernels want every row at a 16-byte boundary and the inner and
// output widths multiples of 8, and otherwise take far slower ones (GPT-2's 50,257 logits a
// row: 3x). So both operands are packed to bf16 in the workspace with zeros padding the rows
// and the inner dimension k (zeros add nothing to the sums); where C's width n is not a
// multiple of 8, n is padded too, and the product goes to an aligned copy first,
// kPaddedOutputBytes at a time. Sums in float32.
void CudaBackend::gemm_bf16(bool ta, bool tb, const Tensor& a, const Tensor& b, float beta, Tensor c) {
  auto lock = enter();
  const auto [m, k, n] = gemm_dims(ta, tb, a, b, c);
  if (m == 0 || n == 0) return;
  const int64_t k8 = round_up(k, kBf16Row), ldc = round_up(n, kBf16Row);
  const bool unaligned_c = ldc != n;
  // op(B)'s columns are B's rows where B is transposed: padded to ldc like C's.
  const PackedOperand pa = packed_shape(a, ta), pb = packed_shape(b, !tb || unaligned_c);
  const int64_t chunk = unaligned_c ? std::clamp(kPaddedOutputBytes / (4 * ldc) / 8 * 8, int64_t{8}, round_up(m, 8)) : m;
  // Workspace: a's packed copy, b's (each only where needed), then the padded output.
  const int64_t a_space = packed_already(a, pa) ? 0 : pa.elements(), b_space = packed_already(b, pb) ? 0 : pb.elements();
  auto* space = static_cast<uint16_t*>(
      workspace(static_cast<size_t>(2 * (a_space + b_space) + (unaligned_c ? 4 * chunk * ldc : 0))));
  const uint16_t* a16 = packed_operand(a, pa, space, stream_);
  const uint16_t* b16 = packed_operand(b, pb, space + a_space, stream_);
  DT_CUBLAS(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  if (!unaligned_c) return bf16_product(cublas_, ta, tb, m, k8, n, a16, pa.ld, b16, pb.ld, beta, c.f32(), n);
  // The padded columns of C are zeros: op(B)'s padded columns are.
  auto* padded = reinterpret_cast<float*>(space + a_space + b_space);  // 16-byte aligned: elements in 8s
  for (int64_t r0 = 0; r0 < m; r0 += chunk) {
    const int64_t rows = std::min(chunk, m - r0);
    // Rows r0.. of op(A): rows of A, or columns where A is transposed (r0 is a multiple of 8).
    const uint16_t* a_rows = a16 + (ta ? r0 : r0 * pa.ld);
    bf16_product(cublas_, ta, tb, rows, k8, ldc, a_rows, pa.ld, b16, pb.ld, 0.0f, padded, ldc);
    cuda::unpad_rows(padded, rows, n, ldc, beta, c.f32() + r0 * n, stream_);
  }
}

}  // namespace distrain
