#include "core/backend/cuda/cuda_backend.hpp"

#include "core/backend/cuda/cuda_check.hpp"
#include "core/backend/cuda/cuda_unavailable.hpp"
#include "core/backend/cuda/kernels.hpp"

namespace distrain {

namespace {

constexpr size_t kCublasWorkspace = size_t{32} << 20;  // set once, so cuBLAS never allocates mid-step

void check_cuda(const Tensor& t, const CudaBackend& be, const char* what) {
  DT_CHECK(t.device == be.device(), "{} is on {}, expected {}", what, t.device.str(), be.device().str());
}

}  // namespace

CudaBackend::CudaBackend(int index) : index_(index), allow_tf32_(false) {
  DT_CUDA(cudaSetDevice(index_));
  DT_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  DT_CUBLAS(cublasCreate(&cublas_));
  DT_CUBLAS(cublasSetStream(cublas_, stream_));
  DT_CUDA(cudaMalloc(&cublas_workspace_, kCublasWorkspace));
  DT_CUBLAS(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace));
  DT_CUDNN(cudnnCreate(&cudnn_));
  DT_CUDNN(cudnnSetStream(cudnn_, stream_));
}

CudaBackend::~CudaBackend() {
  // At process exit the driver may already be going; nothing here can report a failure.
  cudaSetDevice(index_);
  if (stream_) cudaStreamSynchronize(stream_);
  if (workspace_) cudaFree(workspace_);
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

std::unique_lock<std::recursive_mutex> CudaBackend::enter() {
  std::unique_lock lock(mutex_);
  DT_CUDA(cudaSetDevice(index_));
  allow_tf32_ = distrain::allow_tf32();
  return lock;
}

void* CudaBackend::workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  auto lock = enter();
  // Stream-ordered: work already queued that uses the old area finishes first.
  if (workspace_) DT_CUDA(cudaFreeAsync(workspace_, stream_));
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  DT_CUDA(cudaMallocAsync(&workspace_, bytes, stream_));
  workspace_bytes_ = bytes;
  return workspace_;
}

void* CudaBackend::allocate(size_t bytes) {
  auto lock = enter();
  void* p = nullptr;
  const cudaError_t e = cudaMallocAsync(&p, bytes, stream_);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it, or the next launch check would report it again
    throw UserError(fmt::format("{}: out of GPU memory allocating {:.1f} MiB; use a smaller per_replica_batch or model",
                                device().str(), static_cast<double>(bytes) / (1 << 20)));
  }
  DT_CUDA(e);
  return p;
}

void CudaBackend::deallocate(void* p) {
  auto lock = enter();
  DT_CUDA(cudaFreeAsync(p, stream_));
}

void CudaBackend::upload(const void* host, Tensor dst) {
  auto lock = enter();
  check_cuda(dst, *this, "upload target");
  // From pageable memory the call returns once `host` has been read, so it may be reused.
  DT_CUDA(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::download(const Tensor& src, void* host) {
  auto lock = enter();
  check_cuda(src, *this, "download source");
  DT_CUDA(cudaMemcpyAsync(host, src.data, src.bytes(), cudaMemcpyDeviceToHost, stream_));
  DT_CUDA(cudaStreamSynchronize(stream_));
}

int64_t CudaBackend::free_bytes() {
  auto lock = enter();
  size_t free = 0, total = 0;
  DT_CUDA(cudaMemGetInfo(&free, &total));
  return static_cast<int64_t>(free);
}

void CudaBackend::synchronize() {
  auto lock = enter();
  DT_CUDA(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(const Tensor& src, Tensor dst) {
  auto lock = enter();
  check_same_numel(src, dst);
  DT_CHECK(src.dtype == dst.dtype, "copy between dtypes");
  if (src.data != dst.data) DT_CUDA(cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDefault, stream_));
}

void CudaBackend::fill(Tensor t, float value) {
  auto lock = enter();
  check_cuda(t, *this, "fill target");
  cuda::fill(t.f32(), t.numel(), value, stream_);
}

void CudaBackend::gather_examples(const Tensor& table, const Tensor& rows, Tensor out) {
  auto lock = enter();
  check_cuda(table, *this, "gather table");
  check_cuda(rows, *this, "gather rows");
  check_cuda(out, *this, "gather output");
  const int64_t width = gather_width(table, rows, out), n = rows.numel();
  if (table.dtype == DType::u8) cuda::gather_rows(table.u8(), rows.i32(), n, width, out.f32(), stream_);
  else if (table.dtype == DType::f32) cuda::gather_rows(table.f32(), rows.i32(), n, width, out.f32(), stream_);
  else cuda::gather_rows(table.i32(), rows.i32(), n, width, out.i32(), stream_);
}

void CudaBackend::gemm(bool ta, bool tb, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor c) {
  auto lock = enter();
  const auto [m, k, n] = gemm_dims(ta, tb, a, b, c);
  if (m == 0 || n == 0) return;
  DT_CUBLAS(cublasSetMathMode(cublas_, allow_tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  DT_CUBLAS(cublasSgemm(cublas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(n),
                        static_cast<int>(m), static_cast<int>(k), &alpha, b.f32(), static_cast<int>(b.shape[1]), a.f32(),
                        static_cast<int>(a.shape[1]), &beta, c.f32(), static_cast<int>(n)));
}

cuda::RoundOut round_out(const OutputRounding& rounding, const Tensor& y) {
  if (!rounding.round) return {};
  if (rounding.packed.empty()) return {true, nullptr};
  DT_CHECK(rounding.packed.dtype == DType::bf16 && rounding.packed.numel() == y.numel(),
           "an output of {} rounded into {} {}", y.shape.str(), dtype_name(rounding.packed.dtype),
           rounding.packed.shape.str());
  return {true, static_cast<uint16_t*>(rounding.packed.data)};
}

void CudaBackend::add_bias(Tensor y, const Tensor& bias, const OutputRounding& rounding) {
  auto lock = enter();
  cuda::add_bias(y.f32(), bias.f32(), y.numel(), bias.numel(), round_out(rounding, y), stream_);
}

void CudaBackend::bias_grad(const Tensor& dy, Tensor dbias) {
  auto lock = enter();
  const int64_t c = dbias.numel();
  const int64_t rows = dy.numel() / c;
  if (rows == 0) return;
  cuda::bias_grad(dy.f32(), rows, c, dbias.f32(), workspace(cuda::column_sum_scratch(rows, c)), stream_);
}

void CudaBackend::relu(const Tensor& x, Tensor y) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::relu(x.f32(), y.f32(), x.numel(), stream_);
}

void CudaBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor dx) {
  auto lock = enter();
  check_same_numel(y, dy);
  check_same_numel(dy, dx);
  cuda::relu_backward(y.f32(), dy.f32(), dx.f32(), y.numel(), stream_);
}

void CudaBackend::scale_shift(const Tensor& x, Tensor y, float scale, float shift) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::scale_shift(x.f32(), y.f32(), x.numel(), scale, shift, stream_);
}

void CudaBackend::axpby(float a, const Tensor& x, float b, Tensor y) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::axpby(a, x.f32(), b, y.f32(), x.numel(), stream_);
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor y, const OutputRounding& rounding) {
  auto lock = enter();
  check_same_numel(a, y);
  check_same_numel(b, y);
  cuda::add(a.f32(), b.f32(), y.f32(), y.numel(), round_out(rounding, y), stream_);
}

void CudaBackend::dropout(const Tensor& x, Tensor y, float rate, uint64_t seed) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::dropout(x.f32(), y.f32(), x.numel(), rate, seed, stream_);
}

void CudaBackend::sparse_cross_entropy(const Tensor& logits, const Tensor& labels, bool from_logits, float grad_scale,
                                       Tensor dlogits, Tensor stats) {
  auto lock = enter();
  const int64_t n = logits.shape[0];
  const int64_t k = logits.numel() / n;
  DT_CHECK(labels.numel() == n, "{} labels for {} examples", labels.numel(), n);
  cuda::cross_entropy(logits.f32(), labels.i32(), n, k, from_logits, grad_scale, dlogits.empty() ? nullptr : dlogits.f32(),
                      stats.f32(), workspace(cuda::loss_scratch(n)), stream_);
}

void CudaBackend::mean_squared_error(const Tensor& pred, const Tensor& labels, float grad_scale, Tensor dpred,
                                     Tensor stats) {
  auto lock = enter();
  const int64_t n = pred.shape[0];
  const int64_t k = pred.numel() / n;
  DT_CHECK(labels.numel() == n, "{} labels for {} examples", labels.numel(), n);
  cuda::squared_error(pred.f32(), labels.i32(), n, k, grad_scale, dpred.empty() ? nullptr : dpred.f32(), stats.f32(),
                      workspace(cuda::loss_scratch(n)), stream_);
}

void CudaBackend::sgd_update(Tensor param, const Tensor& grad, Tensor velocity, const SgdHyper& h) {
  auto lock = enter();
  check_same_numel(param, grad);
  cuda::sgd(param.f32(), grad.f32(), velocity.empty() ? nullptr : velocity.f32(), param.numel(), h.learning_rate,
            h.weight_decay * h.learning_rate, h.momentum, h.nesterov, stream_);
}

void CudaBackend::adam_update(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamHyper& h) {
  auto lock = enter();
  check_same_numel(param, grad);
  const float alpha = adam_step_size(h);
  cuda::adam(param.f32(), grad.f32(), m.f32(), v.f32(), param.numel(), alpha, h.weight_decay * h.learning_rate,
             1.0f - h.beta_1, 1.0f - h.beta_2, h.epsilon, stream_);
}

std::unique_ptr<Backend> make_cuda_backend(int index) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  DT_USER_CHECK(e == cudaSuccess && count > 0, "cuda:{}: no usable GPU here ({}); `distrain info` lists the devices",
                index, e == cudaSuccess ? "none visible" : cuda_unavailable_reason(e));
  DT_USER_CHECK(index < count, "cuda:{}: this machine has {} GPU(s), cuda:0 to cuda:{}", index, count, count - 1);
  return std::make_unique<CudaBackend>(index);
}

}  // namespace distrain
