// The transformer ops have no CUDA kernels yet (the GPU issue brings them, each checked
// against its CPU twin): a model that needs one says so on its first use, naming the op.
#include "core/backend/cuda/cuda_backend.hpp"

namespace distrain {

namespace {
[[noreturn]] void not_on_cuda(const char* op) {
  throw UserError(fmt::format("{} has no CUDA kernel yet: train transformer models on cpu devices "
                              "(strategy.devices = [\"cpu:0\"])",
                              op));
}
}  // namespace

void CudaBackend::embedding(const Tensor&, const Tensor&, Tensor) { not_on_cuda("embedding"); }
void CudaBackend::embedding_backward(const Tensor&, const Tensor&, Tensor) { not_on_cuda("embedding"); }
void CudaBackend::layer_norm(const Tensor&, const Tensor&, const Tensor&, float, Tensor, Tensor, Tensor) {
  not_on_cuda("layer_norm");
}
void CudaBackend::layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor,
                                      Tensor, Tensor) {
  not_on_cuda("layer_norm");
}
void CudaBackend::gelu(const Tensor&, Tensor) { not_on_cuda("gelu"); }
void CudaBackend::gelu_backward(const Tensor&, const Tensor&, Tensor) { not_on_cuda("gelu"); }
void CudaBackend::attention(const Tensor&, int64_t, float, uint64_t, Tensor, Tensor) { not_on_cuda("attention"); }
void CudaBackend::attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, float, uint64_t,
                                     Tensor) {
  not_on_cuda("attention");
}

}  // namespace distrain
