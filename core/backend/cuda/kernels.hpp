// Launchers of distrain's own CUDA kernels. Each enqueues on `stream`, returns at once
// and throws Error if the launch failed. The kernels live in the *.cu files beside this
// one, compiled as C++17 (see cmake/cuda.cmake), so this header stays plain C++.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace distrain::cuda {

// Kernels whose element counts can pass 2^31 compute their indices in 32 bits when every
// index stays below this (64-bit division and remainder cost many instructions each), in
// 64 bits otherwise. The margin keeps the last block's thread indices representable too.
constexpr int64_t kMaxInt32Index = (int64_t{1} << 31) - 256;

// What a kernel does with the values it writes (OutputRounding in backend.hpp): nothing, or
// rounds them to bf16 and, where packed is not null, stores their bits there too.
struct RoundOut {
  bool round = false;
  uint16_t* packed = nullptr;
};

// --- element-wise (elementwise.cu) ---
void fill(float* p, int64_t n, float value, cudaStream_t stream);
void add_bias(float* y, const float* bias, int64_t n, int64_t channels, RoundOut out, cudaStream_t stream);
void add(const float* a, const float* b, float* y, int64_t n, RoundOut out, cudaStream_t stream);  // y = a + b
void relu(const float* x, float* y, int64_t n, cudaStream_t stream);
void relu_backward(const float* y, const float* dy, float* dx, int64_t n, cudaStream_t stream);  // dx may be dy
void scale_shift(const float* x, float* y, int64_t n, float scale, float shift, cudaStream_t stream);
void axpby(float a, const float* x, float b, float* y, int64_t n, cudaStream_t stream);
void dropout(const float* x, float* y, int64_t n, float rate, uint64_t seed, cudaStream_t stream);
// y = (y + bias) (bias may be null), then max(y, 0) with relu.
void bias_relu(float* y, const float* bias, int64_t n, int64_t channels, bool relu, cudaStream_t stream);

// out (n, width) = rows of table (count, width), as float32 (from uint8 or float32) or
// int32; rows (n) int32 in [0, count).
void gather_rows(const uint8_t* table, const int32_t* rows, int64_t n, int64_t width, float* out, cudaStream_t stream);
void gather_rows(const float* table, const int32_t* rows, int64_t n, int64_t width, float* out, cudaStream_t stream);
void gather_rows(const int32_t* table, const int32_t* rows, int64_t n, int64_t width, int32_t* out, cudaStream_t stream);

// Scratch bytes for the deterministic column sums of a (rows, cols) matrix.
size_t column_sum_scratch(int64_t rows, int64_t cols);
// dbias (cols) += column sums of dy (rows, cols).
void bias_grad(const float* dy, int64_t rows, int64_t cols, float* dbias, void* scratch, cudaStream_t stream);

// --- losses and optimizers (elementwise.cu) ---
size_t loss_scratch(int64_t n);
// stats (2) = {sum of per-example losses, correct argmax count}; d (n, k) = gradient * grad_scale
// unless null. A label outside [0, k) makes the loss NaN.
void cross_entropy(const float* z, const int32_t* labels, int64_t n, int64_t k, bool from_logits, float grad_scale,
                   float* dz, float* stats, void* scratch, cudaStream_t stream);
void squared_error(const float* p, const int32_t* labels, int64_t n, int64_t k, float grad_scale, float* dp,
                   float* stats, void* scratch, cudaStream_t stream);
void sgd(float* param, const float* grad, float* velocity, int64_t n, float lr, float decay, float momentum,
         bool nesterov, cudaStream_t stream);
void adam(float* param, const float* grad, float* m, float* v, int64_t n, float alpha, float decay, float one_minus_b1,
          float one_minus_b2, float epsilon, cudaStream_t stream);

// --- transformer ops (transformer_kernels.cu); x (rows, c) where not stated ---
// out (n, c) = rows ids - first of table (rows, c); ids outside give zero rows where
// outside_zero (a vocabulary slice), NaN rows otherwise (the loss then says so).
void embedding(const float* table, const int32_t* ids, int64_t n, int64_t c, int64_t rows, int64_t first,
               bool outside_zero, float* out, cudaStream_t stream);
size_t embedding_backward_scratch(int64_t n);
// dtable (rows, c) += dout (n, c) scattered to rows ids - first, in position order per row;
// ids outside the table add nothing.
void embedding_backward(const int32_t* ids, int64_t n, int64_t c, int64_t rows, int64_t first, const float* dout,
                        float* dtable, void* scratch, cudaStream_t stream);
void layer_norm(const float* x, const float* gamma, const float* beta, float epsilon, int64_t rows, int64_t c,
                float* y, float* mean, float* rstd, RoundOut out, cudaStream_t stream);
size_t layer_norm_backward_scratch(int64_t rows, int64_t c);
// dx written unless null; dgamma and dbeta accumulated.
void layer_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean, const float* rstd,
                         int64_t rows, int64_t c, float* dx, float* dgamma, float* dbeta, void* scratch,
                         cudaStream_t stream);
void gelu(const float* x, float* y, int64_t n, RoundOut out, cudaStream_t stream);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream);  // dx may be dy
// --- Llama-family ops (llama_kernels.cu) ---
void rms_norm(const float* x, const float* gamma, float epsilon, int64_t rows, int64_t c, float* y, float* rstd,
              RoundOut out, cudaStream_t stream);
size_t rms_norm_backward_scratch(int64_t rows, int64_t c);
// dx written unless null; dgamma accumulated.
void rms_norm_backward(const float* x, const float* dy, const float* gamma, const float* rstd, int64_t rows, int64_t c,
                       float* dx, float* dgamma, void* scratch, cudaStream_t stream);
// qkv (n, t, (heads + 2 kv_heads) d) turned in place by angles (2, t, d/2) (Backend::rotary).
void rotary(float* qkv, int64_t n, int64_t t, int64_t heads, int64_t kv_heads, int64_t d, const float* angles,
            bool inverse, cudaStream_t stream);
void silu(const float* x, float* y, int64_t n, RoundOut out, cudaStream_t stream);
void silu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream);  // dx may be dy
// h (rows, 2f) = [gate | up] -> y (rows, f) = act(gate) * up; silu, else GELU.
void gated_unit(const float* h, int64_t rows, int64_t f, bool silu, float* y, RoundOut out, cudaStream_t stream);
void gated_unit_backward(const float* h, const float* dy, int64_t rows, int64_t f, bool silu, float* dh,
                         cudaStream_t stream);
// Grouped-query attention on the multi-head kernels: qkv (rows, (heads + 2 kv_heads) d)
// widened to (rows, 3 heads d), query head h given key and value head h mod kv_heads; and
// the widened gradients summed back, each key or value head's over its query heads.
template <typename T>
void expand_kv(const T* grouped, int64_t rows, int64_t heads, int64_t kv_heads, int64_t d, T* wide,
               cudaStream_t stream);
void sum_kv(const float* wide, int64_t rows, int64_t heads, int64_t kv_heads, int64_t d, float* grouped,
            cudaStream_t stream);
// --- causal attention (attention_kernels.cu; bf16 operands: attention_bf16_kernels.cu) ---
// The largest head dimension the attention kernels take.
constexpr int64_t kMaxHeadDim = 128;
// qkv (n, t, 3c) with c / heads <= kMaxHeadDim: out (n, t, c), lse (n, heads, t); dropout
// of `rate` on the probabilities, the mask drawn as dropout() draws it; bf16: the products'
// operands rounded to bf16 (Backend::attention). The qkv of bf16 operands: `qkv` packed
// into the scratch, or qkv16 where given (already packed, qkv unused).
struct AttentionInput {
  const float* qkv;
  const uint16_t* qkv16;
};
void attention(AttentionInput in, int64_t n, int64_t heads, int64_t t, int64_t c, bool bf16, float rate,
               uint64_t seed, float* out, float* lse, void* scratch, cudaStream_t stream);
size_t attention_scratch(int64_t n, int64_t t, int64_t c, bool pack_qkv);
size_t attention_backward_scratch(int64_t n, int64_t heads, int64_t t, int64_t c, bool bf16, bool pack_qkv);
// dqkv (n, t, 3c) written whole from dout (n, t, c) and the forward's qkv, out and lse.
void attention_backward(AttentionInput in, const float* out, const float* lse, const float* dout, int64_t n,
                        int64_t heads, int64_t t, int64_t c, bool bf16, float rate, uint64_t seed, float* dqkv,
                        void* scratch, cudaStream_t stream);

// --- bf16 (bf16_kernels.cu): float32's upper 16 bits, rounded to nearest even as the CPU rounds ---
// y = x rounded (x may be y) unless y is null; packed (bf16) receives the same values at 2
// bytes unless null.
void round_bf16(const float* x, float* y, uint16_t* packed, int64_t n, cudaStream_t stream);
void unpack_bf16(const uint16_t* packed, float* y, int64_t n, cudaStream_t stream);
// x (rows, cols) rounded into packed (padded_rows >= rows, each ld apart: a multiple of 8
// >= cols, packed 16-byte aligned), zeros everywhere else: tensor-core products read rows at
// 16-byte boundaries, and zero rows and columns pad an inner dimension without changing sums.
void pack_bf16_rows(const float* x, int64_t rows, int64_t cols, int64_t ld, int64_t padded_rows, uint16_t* packed,
                    cudaStream_t stream);
// The same from bf16 values, copied.
void pack_bf16_rows(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, int64_t padded_rows, uint16_t* packed,
                    cudaStream_t stream);
// c (rows, cols) = padded (rows, ld apart) + beta c, c unread where beta is 0.
void unpad_rows(const float* padded, int64_t rows, int64_t cols, int64_t ld, float beta, float* c, cudaStream_t stream);

// --- convolution helpers (conv_kernels.cu) ---
// Keras kernels (kh, kw, in, out) <-> cuDNN NHWC filters (out, kh, kw, in).
void hwio_to_ohwi(const float* w, float* o, int64_t khw, int64_t cin, int64_t cout, cudaStream_t stream);
void add_ohwi_to_hwio(const float* o, float* w, int64_t khw, int64_t cin, int64_t cout, cudaStream_t stream);
// xp (n, ph, pw, c) = x (n, h, w, c) placed at (top, left), zeros around.
void pad_nhwc(const float* x, float* xp, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
              int64_t ph, int64_t pw, cudaStream_t stream);
// dx (n, h, w, c) = dxp (n, ph, pw, c) from (top, left).
void crop_nhwc(const float* dxp, float* dx, int64_t n, int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
               int64_t ph, int64_t pw, cudaStream_t stream);
// The windows of a convolution's output positions, for im2col.
struct ConvWindows {
  int64_t h, w, c, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
};
// col (rows, kernel_h * kernel_w * c) = the input window of each output position in
// [first, first + rows) (positions numbered (n, oh, ow)), in (kh, kw, c) order as Keras
// kernels are; zeros where the window lies in the padding. Needs rows * kernel_h *
// kernel_w * c and first + rows below 2^31 (32-bit index arithmetic).
void im2col(const ConvWindows& g, const float* x, int64_t first, int64_t rows, float* col, cudaStream_t stream);

// --- pooling (pool_kernels.cu) ---
struct PoolGeometry {
  int64_t in_h, in_w, channels, out_h, out_w, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
  bool max;
};
// argmax may be null (inference, or average pooling).
void pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax, int64_t batch, cudaStream_t stream);
void pool_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax, float* dx, int64_t batch,
                   cudaStream_t stream);

// --- batch norm over (rows, c) (batch_norm_kernels.cu); sums in double ---
void bn_sums(const float* x, int64_t rows, int64_t c, double* out, void* scratch, cudaStream_t stream);
void bn_squared_deviation_sums(const float* x, const double* mean, int64_t rows, int64_t c, double* out, void* scratch,
                               cudaStream_t stream);
void bn_dy_xhat_sums(const float* x, const float* dy, const float* mean, const float* inv_std, int64_t rows, int64_t c,
                     double* out, void* scratch, cudaStream_t stream);
void bn_mean(const double* sums, double count, double* mean_d, float* mean, int64_t c, cudaStream_t stream);
void bn_variance(const double* sums, double count, float* variance, int64_t c, cudaStream_t stream);
void bn_inv_std(const float* variance, float epsilon, float* inv_std, int64_t c, cudaStream_t stream);
void bn_normalize(const float* x, const float* gamma, const float* beta, const float* mean, const float* variance,
                  float epsilon, float* y, int64_t n, int64_t c, cudaStream_t stream);
void bn_param_grads(const double* sum_dy, const double* sum_dy_xhat, float* dgamma, float* dbeta, int64_t c,
                    cudaStream_t stream);
void bn_input_grad(const float* x, const float* dy, const float* gamma, const float* mean, const float* inv_std,
                   const double* sum_dy, const double* sum_dy_xhat, double count, bool fixed_stats, float* dx, int64_t n,
                   int64_t c, cudaStream_t stream);

}  // namespace distrain::cuda
