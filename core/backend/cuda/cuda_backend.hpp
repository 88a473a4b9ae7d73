// The CUDA backend: cuDNN for convolution, cuBLAS for matrix products (float32, and bf16 on
// tensor cores), own kernels for pooling, batch norm, the transformer ops, the element-wise
// work, losses and the fused optimizer updates.
//
// All work of one device goes, in order, onto the backend's one stream; nothing waits
// for the GPU except download(). Replicas that share a GPU (logical devices) share its
// backend, so every op holds the backend's lock while it enqueues (cuDNN handles must
// not be used by two threads at once) and the stream keeps their work ordered.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <mutex>

#include "core/backend/backend.hpp"
#include "core/backend/cuda/kernels.hpp"
#include "core/backend/gpu_info.hpp"

namespace distrain {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int index);
  ~CudaBackend() override;
  Device device() const override { return Device{DeviceType::cuda, index_}; }

  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void upload(const void* host, Tensor dst) override;
  void download(const Tensor& src, void* host) override;
  void copy(const Tensor& src, Tensor dst) override;
  void fill(Tensor t, float value) override;
  void gather_examples(const Tensor& table, const Tensor& rows, Tensor out) override;
  void synchronize() override;
  int64_t free_bytes() override;

  std::unique_ptr<Conv2DOp> make_conv2d(const Conv2DSpec& spec) override;
  std::unique_ptr<Pool2DOp> make_pool2d(const Pool2DSpec& spec) override;
  std::unique_ptr<BatchNormOp> make_batch_norm(int64_t channels, float epsilon) override;

  void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b, float beta,
            Tensor c) override;
  void gemm_bf16(bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b, float beta, Tensor c) override;
  std::string bf16_matmul_unavailable() const override;
  void to_bf16(Tensor x, Tensor packed) override;
  void rounded_bf16(const Tensor& x, Tensor y) override;
  void from_bf16(const Tensor& x, Tensor y) override;
  void add_bias(Tensor y, const Tensor& bias, const OutputRounding& rounding = {}) override;
  void bias_grad(const Tensor& dy, Tensor dbias) override;
  void relu(const Tensor& x, Tensor y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor dx) override;
  void scale_shift(const Tensor& x, Tensor y, float scale, float shift) override;
  void axpby(float a, const Tensor& x, float b, Tensor y) override;
  void add(const Tensor& a, const Tensor& b, Tensor y, const OutputRounding& rounding = {}) override;
  void dropout(const Tensor& x, Tensor y, float rate, uint64_t seed) override;

  void embedding(const Tensor& table, const Tensor& ids, Tensor out) override;
  void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor dtable) override;
  void embedding_slice(const Tensor& table, const Tensor& ids, int64_t first, Tensor out) override;
  void embedding_slice_backward(const Tensor& ids, int64_t first, const Tensor& dout, Tensor dtable) override;
  void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float epsilon, Tensor y, Tensor mean,
                  Tensor rstd, const OutputRounding& rounding = {}) override;
  void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                           Tensor dx, Tensor dgamma, Tensor dbeta) override;
  void gelu(const Tensor& x, Tensor y, const OutputRounding& rounding = {}) override;
  void gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) override;
  void attention(const Tensor& qkv, int64_t heads, int64_t kv_heads, DType operands, float rate, uint64_t seed,
                 Tensor out, Tensor lse) override;
  void attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout, int64_t heads,
                          int64_t kv_heads, DType operands, float rate, uint64_t seed, Tensor dqkv) override;
  void rotary(Tensor qkv, int64_t heads, int64_t kv_heads, const Tensor& angles, bool inverse) override;
  void rms_norm(const Tensor& x, const Tensor& gamma, float epsilon, Tensor y, Tensor rstd,
                const OutputRounding& rounding = {}) override;
  void rms_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& rstd, Tensor dx,
                         Tensor dgamma) override;
  void silu(const Tensor& x, Tensor y, const OutputRounding& rounding = {}) override;
  void silu_backward(const Tensor& x, const Tensor& dy, Tensor dx) override;
  void gated_unit(const Tensor& h, GateActivation act, Tensor y, const OutputRounding& rounding = {}) override;
  void gated_unit_backward(const Tensor& h, GateActivation act, const Tensor& dy, Tensor dh) override;

  void sparse_cross_entropy(const Tensor& logits, const Tensor& labels, bool from_logits, float grad_scale,
                            Tensor dlogits, Tensor stats) override;
  void mean_squared_error(const Tensor& pred, const Tensor& labels, float grad_scale, Tensor dpred,
                          Tensor stats) override;

  void sgd_update(Tensor param, const Tensor& grad, Tensor velocity, const SgdHyper& h) override;
  void adam_update(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamHyper& h) override;

  // For the ops in this folder. enter() makes this GPU current for the calling thread and
  // takes the lock; everything enqueued while it is held goes onto stream().
  std::unique_lock<std::recursive_mutex> enter();
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  bool tf32() const { return allow_tf32_; }  // the recipe's train.allow_tf32, read at enter()
  // A device scratch area of at least `bytes`, valid until the next call (stream order
  // makes reuse by the next op safe).
  void* workspace(size_t bytes);

 private:
  int index_;
  bool allow_tf32_;
  std::recursive_mutex mutex_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  void* cublas_workspace_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// The kernels' form of an op's OutputRounding of y.
cuda::RoundOut round_out(const OutputRounding& rounding, const Tensor& y);

// The backend of GPU `index`; throws UserError when there is no such GPU.
std::unique_ptr<Backend> make_cuda_backend(int index);
// Versions and visible GPUs, for `distrain info` (named apart from the executable's
// gpu_info(), which the plugin's symbols must not shadow).
GpuInfo query_gpu_info();

}  // namespace distrain
