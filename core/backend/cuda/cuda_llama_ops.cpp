// The Llama-family ops on the CUDA backend (llama_kernels.cu): RMS norm, rotary positions,
// SiLU and gated units; grouped-query attention's widening lives beside attention
// (cuda_transformer_ops.cpp).
#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/cuda/cuda_check.hpp"
#include "core/backend/cuda/kernels.hpp"

namespace distrain {

void CudaBackend::rms_norm(const Tensor& x, const Tensor& gamma, float epsilon, Tensor y, Tensor rstd,
                           const OutputRounding& rounding) {
  auto lock = enter();
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  check_same_numel(x, y);
  cuda::rms_norm(x.f32(), gamma.f32(), epsilon, rows, c, y.f32(), rstd.f32(), round_out(rounding, y), stream_);
}

void CudaBackend::rms_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& rstd, Tensor dx,
                                    Tensor dgamma) {
  auto lock = enter();
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  cuda::rms_norm_backward(x.f32(), dy.f32(), gamma.f32(), rstd.f32(), rows, c, dx.empty() ? nullptr : dx.f32(),
                          dgamma.f32(), workspace(cuda::rms_norm_backward_scratch(rows, c)), stream_);
}

void CudaBackend::rotary(Tensor qkv, int64_t heads, int64_t kv_heads, const Tensor& angles, bool inverse) {
  auto lock = enter();
  const int64_t n = qkv.shape[0], t = qkv.shape[1], d = qkv.shape[2] / (heads + 2 * kv_heads);
  DT_CHECK(qkv.shape.rank() == 3 && qkv.shape[2] == (heads + 2 * kv_heads) * d && d % 2 == 0 && angles.numel() == t * d,
           "rotary embedding of {} with {} heads, {} key/value heads and angles {}", qkv.shape.str(), heads, kv_heads,
           angles.shape.str());
  cuda::rotary(qkv.f32(), n, t, heads, kv_heads, d, angles.f32(), inverse, stream_);
}

void CudaBackend::silu(const Tensor& x, Tensor y, const OutputRounding& rounding) {
  auto lock = enter();
  check_same_numel(x, y);
  cuda::silu(x.f32(), y.f32(), x.numel(), round_out(rounding, y), stream_);
}

void CudaBackend::silu_backward(const Tensor& x, const Tensor& dy, Tensor dx) {
  auto lock = enter();
  check_same_numel(x, dx);
  cuda::silu_backward(x.f32(), dy.f32(), dx.f32(), x.numel(), stream_);
}

void CudaBackend::gated_unit(const Tensor& h, GateActivation act, Tensor y, const OutputRounding& rounding) {
  auto lock = enter();
  const int64_t f = y.shape[y.shape.rank() - 1];
  DT_CHECK(h.numel() == 2 * y.numel(), "gated unit of {} into {}", h.shape.str(), y.shape.str());
  cuda::gated_unit(h.f32(), y.numel() / f, f, act == GateActivation::silu, y.f32(), round_out(rounding, y), stream_);
}

void CudaBackend::gated_unit_backward(const Tensor& h, GateActivation act, const Tensor& dy, Tensor dh) {
  auto lock = enter();
  const int64_t f = dy.shape[dy.shape.rank() - 1];
  DT_CHECK(h.numel() == 2 * dy.numel() && dh.numel() == h.numel(), "gated unit gradient of {} from {}", h.shape.str(),
           dy.shape.str());
  cuda::gated_unit_backward(h.f32(), dy.f32(), dy.numel() / f, f, act == GateActivation::silu, dh.f32(), stream_);
}

}  // namespace distrain
