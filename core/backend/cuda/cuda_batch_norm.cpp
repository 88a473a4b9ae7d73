// Batch normalisation on the GPU with the CPU twin's formulas (batch_norm_kernels.cu):
// per-channel sums in double, two passes (mean, then squared deviations), biased
// variance as Keras 3. Own kernels rather than cuDNN's batch norm, which returns only the
// inverse standard deviation and cannot take statistics summed over replicas
// (sync_batch_norm): here the sums are at hand, and under sync they travel through the
// host to be added over all replicas.
#include <vector>

#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/cuda/kernels.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

class CudaBatchNorm final : public BatchNormOp {
 public:
  CudaBatchNorm(CudaBackend& be, int64_t channels, float epsilon)
      : be_(be),
        c_(channels),
        eps_(epsilon),
        sums_(be, Shape{2 * channels}, DType::f64),
        mean_d_(be, Shape{channels}, DType::f64),
        inv_std_(be, Shape{channels}) {}

  void forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y, Tensor mean,
                        Tensor variance, const CrossReplicaSum* sync) override {
    auto lock = be_.enter();
    const int64_t rows = x.numel() / c_;
    double* sums = sums_.view().f64();
    cuda::bn_sums(x.f32(), rows, c_, sums, scratch(rows), be_.stream());
    const double count = reduce(c_, static_cast<double>(rows), sync, lock);
    cuda::bn_mean(sums, count, mean_d_.view().f64(), mean.f32(), c_, be_.stream());
    cuda::bn_squared_deviation_sums(x.f32(), mean_d_.view().f64(), rows, c_, sums, scratch(rows), be_.stream());
    reduce(c_, 0.0, sync, lock);
    cuda::bn_variance(sums, count, variance.f32(), c_, be_.stream());
    cuda::bn_normalize(x.f32(), gamma.f32(), beta.f32(), mean.f32(), variance.f32(), eps_, y.f32(), x.numel(), c_,
                       be_.stream());
  }

  void forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                         const Tensor& variance, Tensor y) override {
    auto lock = be_.enter();
    cuda::bn_normalize(x.f32(), gamma.f32(), beta.f32(), mean.f32(), variance.f32(), eps_, y.f32(), x.numel(), c_,
                       be_.stream());
  }

  void backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean, const Tensor& variance,
                bool fixed_stats, Tensor dx, Tensor dgamma, Tensor dbeta, const CrossReplicaSum* sync) override {
    auto lock = be_.enter();
    const int64_t rows = x.numel() / c_;
    float* inv_std = inv_std_.view().f32();
    cuda::bn_inv_std(variance.f32(), eps_, inv_std, c_, be_.stream());
    double* sum_dy = sums_.view().f64();
    double* sum_dy_xhat = sum_dy + c_;
    cuda::bn_sums(dy.f32(), rows, c_, sum_dy, scratch(rows), be_.stream());
    cuda::bn_dy_xhat_sums(x.f32(), dy.f32(), mean.f32(), inv_std, rows, c_, sum_dy_xhat, scratch(rows), be_.stream());
    // dgamma and dbeta are this replica's share; dx needs the global sums under sync.
    cuda::bn_param_grads(sum_dy, sum_dy_xhat, dgamma.f32(), dbeta.f32(), c_, be_.stream());
    const double count = fixed_stats ? static_cast<double>(rows) : reduce(2 * c_, static_cast<double>(rows), sync, lock);
    cuda::bn_input_grad(x.f32(), dy.f32(), gamma.f32(), mean.f32(), inv_std, sum_dy, sum_dy_xhat, count, fixed_stats,
                        dx.f32(), x.numel(), c_, be_.stream());
  }

 private:
  void* scratch(int64_t rows) { return be_.workspace(cuda::column_sum_scratch(rows, c_)); }

  // With `sync`, the first `len` sums (and `count`, appended) become their totals over
  // all replicas, through the host; returns the total count. The backend's lock is let go
  // while the sum waits for the other replicas: those on the same GPU (logical devices)
  // need it to reach the sum at all.
  double reduce(int64_t len, double count, const CrossReplicaSum* sync, std::unique_lock<std::recursive_mutex>& lock) {
    if (!sync) return count;
    host_.resize(static_cast<size_t>(len) + 1);
    const Tensor sums = sums_.view().range(0, len);
    be_.download(sums, host_.data());
    host_.back() = count;
    lock.unlock();
    (*sync)(Tensor{host_.data(), Shape{len + 1}, DType::f64, Device{}});
    lock.lock();
    be_.upload(host_.data(), sums);
    return host_.back();
  }

  CudaBackend& be_;
  int64_t c_;
  float eps_;
  Buffer sums_;     // (2C) double: one pass's sums, or sum(dy) then sum(dy * xhat)
  Buffer mean_d_;   // (C) double
  Buffer inv_std_;  // (C)
  std::vector<double> host_;
};

}  // namespace

std::unique_ptr<BatchNormOp> CudaBackend::make_batch_norm(int64_t channels, float epsilon) {
  return std::make_unique<CudaBatchNorm>(*this, channels, epsilon);
}

}  // namespace distrain
