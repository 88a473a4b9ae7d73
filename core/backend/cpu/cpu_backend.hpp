// The CPU backend: oneDNN primitives for convolution, pooling, batch norm and GEMM;
// OpenMP loops for the element-wise work, losses and optimizer updates.
#pragma once
#include <dnnl.hpp>

#include "core/backend/backend.hpp"

namespace distrain {

// Row loops (transformer ops, the class-slice loss) with fewer rows than this run on one thread.
inline constexpr int64_t kParallelRows = 64;
// Memory-bound passes (fill, copy) over more bytes than this use every thread: one core
// does not reach the memory bandwidth, and a model's gradient arena is zeroed every step.
inline constexpr int64_t kParallelBytes = int64_t{1} << 22;

// all_finite and sum_of_squares (backend.hpp) of n floats in host memory: the same answer
// on any number of threads.
bool cpu_all_finite(const float* p, int64_t n);
double cpu_sum_of_squares(const float* p, int64_t n);

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int index);
  Device device() const override { return Device{DeviceType::cpu, index_}; }

  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  void upload(const void* host, Tensor dst) override;
  void download(const Tensor& src, void* host) override;
  void copy(const Tensor& src, Tensor dst) override;
  void fill(Tensor t, float value) override;
  void gather_examples(const Tensor& table, const Tensor& rows, Tensor out) override;

  std::unique_ptr<Conv2DOp> make_conv2d(const Conv2DSpec& spec) override;
  std::unique_ptr<Pool2DOp> make_pool2d(const Pool2DSpec& spec) override;
  std::unique_ptr<BatchNormOp> make_batch_norm(int64_t channels, float epsilon) override;

  void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b, float beta,
            Tensor c) override;
  void gemm_bf16(bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b, float beta, Tensor c) override;
  std::string bf16_matmul_unavailable() const override;
  std::string bf16_matmul_emulated() const override;
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
  void class_slice_max(const Tensor& logits, Tensor max) override;
  void class_slice_sums(const Tensor& logits, const Tensor& labels, int64_t first, const Tensor& max, Tensor sums) override;
  void class_slice_cross_entropy(const Tensor& logits, const Tensor& labels, int64_t first, const Tensor& max,
                                 const Tensor& sums, float grad_scale, Tensor dlogits, Tensor stats) override;
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

  dnnl::engine& engine() { return engine_; }
  dnnl::stream& stream() { return stream_; }

 private:
  // The CPU rounds in a second pass over the output (threaded, in cache-sized tiles).
  void round_output(Tensor y, const OutputRounding& rounding) {
    if (rounding.round) to_bf16(y, rounding.packed);
  }

  int index_;
  dnnl::engine engine_;
  dnnl::stream stream_;
};

}  // namespace distrain
