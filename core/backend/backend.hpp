// Backend: the compute interface every device implements (cpu/ on oneDNN + OpenMP,
// cuda/ on cuDNN + cuBLAS). Layers, losses and optimizers call only this, so a new
// device is a new Backend, not a change to them.
//
// Contracts shared by every op:
//   - activations are NHWC; conv kernels are (kh, kw, in, out) as Keras stores them;
//   - parameter gradients are accumulated (+=), input gradients are written (=);
//   - all tensors live on this backend's device; float32 unless stated.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/backend/device_memory.hpp"
#include "core/tensor/tensor.hpp"

namespace distrain {

struct Conv2DSpec {
  int64_t in_h, in_w, in_c;
  int64_t out_h, out_w, out_c;
  int64_t kernel_h, kernel_w, stride_h, stride_w;
  int64_t pad_top, pad_bottom, pad_left, pad_right;  // TensorFlow "same" padding is asymmetric
  bool bias;
  bool relu;  // fuse a ReLU into the forward pass
};

// An op's output rounded to bfloat16 as the op writes it, where the model would round it
// next (train.precision = "bf16"): the float32 output holds the rounded values and, where
// `packed` is given (bf16, as many elements), the same values at 2 bytes each. Bit for bit
// the op followed by to_bf16(output, packed), in one pass over the output instead of two.
struct OutputRounding {
  bool round = false;
  Tensor packed;
};

// The activation of a gated linear unit's gate (Backend::gated_unit).
enum class GateActivation { silu, gelu };

class Conv2DOp {
 public:
  virtual ~Conv2DOp() = default;
  // x (N, H, W, Cin), w (kh, kw, Cin, Cout), b (Cout) or empty  ->  y (N, OH, OW, Cout)
  virtual void forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor y) = 0;
  // dy (N, OH, OW, Cout)  ->  dx (N, H, W, Cin)   (written)
  virtual void backward_data(const Tensor& dy, const Tensor& w, Tensor dx) = 0;
  // dw (kh, kw, Cin, Cout) +=, db (Cout) += (db may be empty). With relu_y (the fused ReLU's
  // output) not empty, dy is the gradient before that ReLU: the op masks it by relu_y > 0,
  // in place first or as it reads it, so dy is undefined afterwards.
  virtual void backward_weights(const Tensor& x, const Tensor& dy, const Tensor& relu_y, Tensor dw, Tensor db) = 0;
};

enum class PoolKind { max, average };

struct Pool2DSpec {
  PoolKind kind;
  int64_t in_h, in_w, channels;
  int64_t out_h, out_w;
  int64_t kernel_h, kernel_w, stride_h, stride_w;
  int64_t pad_top, pad_bottom, pad_left, pad_right;  // padded cells never count (TF semantics)
};

class Pool2DOp {
 public:
  virtual ~Pool2DOp() = default;
  // x (N, H, W, C) -> y (N, OH, OW, C). In training, max pooling remembers where maxima were.
  virtual void forward(const Tensor& x, Tensor y, bool training) = 0;
  // dy (N, OH, OW, C) -> dx (N, H, W, C) (written); follows the last training forward.
  virtual void backward(const Tensor& dy, Tensor dx) = 0;
};

// Sums a small host float64 tensor over every replica of the job, in place (the same
// order everywhere). Given to batch norm for cross-replica statistics (sync_batch_norm).
using CrossReplicaSum = std::function<void(Tensor values)>;

class BatchNormOp {
 public:
  virtual ~BatchNormOp() = default;
  // Normalises over N, H, W per channel with the batch statistics; mean/variance (C) receive
  // them (variance biased, divided by the count, as Keras 3). With `sync`, the statistics
  // are those of the global batch (all replicas).
  virtual void forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor y, Tensor mean,
                                Tensor variance, const CrossReplicaSum* sync) = 0;
  virtual void forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                 const Tensor& variance, Tensor y) = 0;
  // dx written; dgamma, dbeta accumulated (this replica's share; the strategy reduces them).
  // mean/variance are those the forward used: the batch statistics (which then depend on
  // x, over all replicas with `sync`), or with fixed_stats the moving ones (constants).
  virtual void backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                        const Tensor& variance, bool fixed_stats, Tensor dx, Tensor dgamma, Tensor dbeta,
                        const CrossReplicaSum* sync) = 0;
};

struct SgdHyper {
  float learning_rate, momentum, weight_decay;
  bool nesterov;
};

struct AdamHyper {
  float learning_rate, beta_1, beta_2, epsilon, weight_decay;  // weight_decay decoupled (AdamW)
  int64_t step;                                                 // 1 for the first update
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p) = 0;
  // What Buffers hold on this device, against its budget (Buffer charges and refunds).
  DeviceMemory& memory() { return memory_; }
  // Host <-> device and device <-> device copies of whole tensors.
  virtual void upload(const void* host, Tensor dst) = 0;
  virtual void download(const Tensor& src, void* host) = 0;
  virtual void copy(const Tensor& src, Tensor dst) = 0;
  virtual void fill(Tensor t, float value) = 0;
  // out (n, example...) = the examples `rows` (int32, n) of `table` (N, example...), as
  // float32 from a uint8 or float32 table, as int32 from an int32 one (labels): the batches
  // of a dataset kept on the device (DeviceData), with no host copy of their images.
  virtual void gather_examples(const Tensor& table, const Tensor& rows, Tensor out) = 0;
  // Returns once the work queued so far is done (a GPU's stream drained); the CPU's is done
  // when its calls return. For timing alone (`bench --profile`): no op needs it.
  virtual void synchronize() {}
  // Bytes of device memory free now, or -1 where that is the host's (CPU).
  virtual int64_t free_bytes() { return -1; }

  virtual std::unique_ptr<Conv2DOp> make_conv2d(const Conv2DSpec& spec) = 0;
  virtual std::unique_ptr<Pool2DOp> make_pool2d(const Pool2DSpec& spec) = 0;
  virtual std::unique_ptr<BatchNormOp> make_batch_norm(int64_t channels, float epsilon) = 0;

  // c = alpha * op(a) * op(b) + beta * c, row-major 2-D tensors.
  virtual void gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b, float beta,
                    Tensor c) = 0;
  // c = op(a) * op(b) + beta * c with both operands rounded to bfloat16 and the products
  // accumulated in float32 (train.precision = "bf16"); an operand may come as float32
  // (rounded here) or already as bf16 (Layer::shared_operand). Only where
  // bf16_matmul_unavailable() is empty; it takes bf16_gemm_scratch_bytes of this device
  // while it runs.
  virtual void gemm_bf16(bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b, float beta, Tensor c);
  // Why this device cannot run gemm_bf16 (its backend), or empty.
  virtual std::string bf16_matmul_unavailable() const;
  // How this device runs gemm_bf16 without bf16 kernels, to tell the user; empty where it has them.
  virtual std::string bf16_matmul_emulated() const { return ""; }
  // x rounded to bfloat16 (to nearest even) in place and, where `packed` is given (bf16),
  // packed into it at 2 bytes an element, in one pass. And back: y (float32) = x (bf16).
  // Where bf16_matmul_unavailable() is empty.
  virtual void to_bf16(Tensor x, Tensor packed);
  // y = x rounded to bf16, x unchanged: as float32 (y f32) or packed (y bf16).
  virtual void rounded_bf16(const Tensor& x, Tensor y);
  virtual void from_bf16(const Tensor& x, Tensor y);
  // y (rows, C) += bias (C). The ops that take an OutputRounding use the same default in
  // every backend.
  virtual void add_bias(Tensor y, const Tensor& bias, const OutputRounding& rounding = {}) = 0;
  virtual void bias_grad(const Tensor& dy, Tensor dbias) = 0;     // dbias (C) += column sums of dy (rows, C)
  virtual void relu(const Tensor& x, Tensor y) = 0;               // may be in place
  virtual void relu_backward(const Tensor& y, const Tensor& dy, Tensor dx) = 0;  // dx = dy * (y > 0); dx may be dy
  virtual void scale_shift(const Tensor& x, Tensor y, float scale, float shift) = 0;  // y = x*scale + shift
  virtual void axpby(float a, const Tensor& x, float b, Tensor y) = 0;                 // y = a*x + b*y
  virtual void add(const Tensor& a, const Tensor& b, Tensor y, const OutputRounding& rounding = {}) = 0;  // y = a + b
  // y = x * keep / (1 - rate), keep drawn from uniform_at(seed, i) >= rate. The same call
  // with the same seed applied to dy gives dx, so no mask is stored.
  virtual void dropout(const Tensor& x, Tensor y, float rate, uint64_t seed) = 0;

  // Transformer ops; x (rows, C) where not stated.
  // out (n, C) = table (V, C) rows ids (int32, n); dtable += dout scattered back to those rows.
  virtual void embedding(const Tensor& table, const Tensor& ids, Tensor out) = 0;
  virtual void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor dtable) = 0;
  // The same on a vocabulary slice (tensor parallelism): table (V, C) holds the rows of
  // ids [first, first + V); other ids give zero rows and no gradient.
  virtual void embedding_slice(const Tensor& table, const Tensor& ids, int64_t first, Tensor out);
  virtual void embedding_slice_backward(const Tensor& ids, int64_t first, const Tensor& dout, Tensor dtable);
  // y = (x - mean) * rstd * gamma + beta per row; mean, rstd (rows) kept for the backward.
  virtual void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float epsilon, Tensor y,
                          Tensor mean, Tensor rstd, const OutputRounding& rounding = {}) = 0;
  // dx written, dgamma and dbeta accumulated.
  virtual void layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                   const Tensor& rstd, Tensor dx, Tensor dgamma, Tensor dbeta) = 0;
  // GPT-2's tanh approximation of GELU; dx may be dy.
  virtual void gelu(const Tensor& x, Tensor y, const OutputRounding& rounding = {}) = 0;
  virtual void gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) = 0;
  // Causal multi-head self-attention. qkv (N, T, (H + 2 KV) D) holds the queries of H heads,
  // then the keys of KV heads, then their values; query head h reads key and value head
  // h mod KV (grouped-query attention; KV = H: GPT-2's [q | k | v]; KV = 1: multi-query).
  // out (N, T, H D) = softmax(q k^T / sqrt(D), causal) v per head, with dropout of `rate`
  // on the probabilities (mask drawn from seed, as dropout()); lse (N, H, T) receives each
  // row's log-sum-exp for the backward. Never holds more than a tile of a head's (T, T)
  // scores (flash attention). Operands bf16 (train.precision): every product's operands
  // are bf16 values, as tensor cores take them: qkv is already rounded (the attention layer
  // rounds it), the probabilities, output gradients and score gradients are rounded as
  // they enter a product; sums, softmax and results stay float32. Under bf16 operands qkv
  // may come packed in bf16 (the values the layer keeps), read as they are.
  virtual void attention(const Tensor& qkv, int64_t heads, int64_t kv_heads, DType operands, float rate, uint64_t seed,
                         Tensor out, Tensor lse) = 0;
  // dqkv written from dout (N, T, H D) and the forward's qkv, out and lse; a key or value
  // head's gradient sums those of the query heads that read it.
  virtual void attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  int64_t heads, int64_t kv_heads, DType operands, float rate, uint64_t seed,
                                  Tensor dqkv) = 0;
  // Rotary position embeddings (RoFormer; Llama's "rotate half" pairing) on the queries and
  // keys of qkv (N, T, (H + 2 KV) D), in place: in each head, elements e and e + D/2 of
  // position t turn by the angle t * frequency[e]; angles (2, T, D/2) holds their cosines,
  // then their sines. `inverse` turns back (the transpose): a gradient's way through.
  virtual void rotary(Tensor qkv, int64_t heads, int64_t kv_heads, const Tensor& angles, bool inverse) = 0;
  // y = x * rstd * gamma per row (RMSNorm), rstd = 1 / sqrt(mean(x^2) + epsilon) kept (rows).
  virtual void rms_norm(const Tensor& x, const Tensor& gamma, float epsilon, Tensor y, Tensor rstd,
                        const OutputRounding& rounding = {}) = 0;
  // dx written, dgamma accumulated.
  virtual void rms_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& rstd, Tensor dx,
                                 Tensor dgamma) = 0;
  // SiLU: y = x sigmoid(x); dx may be dy.
  virtual void silu(const Tensor& x, Tensor y, const OutputRounding& rounding = {}) = 0;
  virtual void silu_backward(const Tensor& x, const Tensor& dy, Tensor dx) = 0;
  // A gated linear unit: h (rows, 2F) holds [gate | up]; y (rows, F) = act(gate) * up, act
  // SiLU (SwiGLU) or GPT-2's tanh GELU (GeGLU). dh (rows, 2F) written from dy (rows, F).
  virtual void gated_unit(const Tensor& h, GateActivation act, Tensor y, const OutputRounding& rounding = {}) = 0;
  virtual void gated_unit_backward(const Tensor& h, GateActivation act, const Tensor& dy, Tensor dh) = 0;

  // Per-example losses of a batch, and their gradient times grad_scale (1 / global batch).
  // stats (2,) receives {sum of losses, number of correct argmax predictions}.
  virtual void sparse_cross_entropy(const Tensor& logits, const Tensor& labels, bool from_logits, float grad_scale,
                                    Tensor dlogits, Tensor stats) = 0;
  // Sparse cross-entropy from logits split by classes over a tensor group (Megatron's
  // vocabulary-parallel cross-entropy): logits (rows, K) are classes [first, first + K) of
  // every row's, labels (rows) index all of them. Three passes around two all-reduces:
  //   class_slice_max        max (rows) = each row's largest logit here; all-reduced (max).
  //   class_slice_sums       sums (rows, 2) = {sum of exp(z - max), the label's logit where
  //                          it is here, else 0}; all-reduced (sum).
  //   class_slice_cross_entropy  stats (2,) and dlogits as sparse_cross_entropy writes them
  //                          (from logits): the same on every rank of the group.
  virtual void class_slice_max(const Tensor& logits, Tensor max);
  virtual void class_slice_sums(const Tensor& logits, const Tensor& labels, int64_t first, const Tensor& max, Tensor sums);
  virtual void class_slice_cross_entropy(const Tensor& logits, const Tensor& labels, int64_t first, const Tensor& max,
                                         const Tensor& sums, float grad_scale, Tensor dlogits, Tensor stats);
  // Mean over classes of (pred - one_hot(label))^2 per example.
  virtual void mean_squared_error(const Tensor& pred, const Tensor& labels, float grad_scale, Tensor dpred,
                                  Tensor stats) = 0;

  virtual void sgd_update(Tensor param, const Tensor& grad, Tensor velocity, const SgdHyper& h) = 0;
  virtual void adam_update(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamHyper& h) = 0;

 private:
  DeviceMemory memory_;
};

// Shared by the implementations, so every device checks and computes alike.
void check_same_numel(const Tensor& a, const Tensor& b);
// (m, k, n) of gemm's op(a) (m x k) * op(b) (k x n) -> c (m x n); throws when shapes disagree.
struct GemmDims {
  int64_t m, k, n;
};
GemmDims gemm_dims(bool transpose_a, bool transpose_b, const Tensor& a, const Tensor& b, const Tensor& c);
// The bytes of the bf16 operand copies a gemm_bf16 of (m, k, n) holds while it runs.
int64_t bf16_gemm_scratch_bytes(int64_t m, int64_t k, int64_t n);
// Values per example of gather_examples(table, rows, out); throws when the shapes or the
// element types do not go together.
int64_t gather_width(const Tensor& table, const Tensor& rows, const Tensor& out);
// Adam's learning rate with both bias corrections folded in, computed in double.
float adam_step_size(const AdamHyper& h);
// True when every element of t (float32) is finite: on the host a scan; on a device its
// column sums as (rows, 16), downloaded (a NaN or infinity anywhere makes its column's sum
// non-finite, as would values near the float limit, which are divergence anyway).
bool all_finite(Backend& backend, const Tensor& t);
// The sum of the squares of t's elements (float32): on the host in double; on a device t.t
// by one GEMM (float accumulation), downloaded.
double sum_of_squares(Backend& backend, const Tensor& t);
// The device half of all_finite, left unread: sums (kFinitenessColumns,) on t's device
// receive t's column sums (all finite exactly when t's elements are, as above).
constexpr int64_t kFinitenessColumns = 16;
void finiteness_sums(Backend& backend, const Tensor& t, Tensor sums);

// The backend of a device; created once per device and shared.
Backend& backend_for(const Device& device);
// The CPU backend over host memory (Device::host()): offloaded optimizer state and its update.
inline Backend& host_backend() { return backend_for(Device::host()); }

// Threads the CPU backend uses (0 = OMP_NUM_THREADS or all cores). Call before first use.
void set_cpu_threads(int threads);
int cpu_threads();
// The cores this process may run on (its affinity mask), whatever the thread setting.
int cpu_cores();

// Whether GPU matrix products and convolutions may round inputs to TF32 (the recipe's
// train.allow_tf32). Off by default: results then match the CPU to float32 precision.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace distrain
