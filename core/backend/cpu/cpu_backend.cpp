#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_vector_math.hpp"

#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>

#include "core/base/host_memory.hpp"
#include "core/base/rng.hpp"

namespace distrain {

namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kCheckedAllocation = size_t{64} << 20;  // reading /proc/meminfo costs more than small allocations
constexpr int64_t kParallelThreshold = 1 << 14;  // below this, threads cost more than they save

void check_cpu(const Tensor& t, const char* what) {
  DT_CHECK(t.device.is_cpu(), "{} is on {}, expected a cpu tensor", what, t.device.str());
}

}  // namespace

// Activation buffers of a few MiB are freed and made again every step under recomputation
// (and every layer's transient buffers under sequence parallelism). glibc would hand them
// back to the kernel (mmap, heap trimming) and fault their pages in again each time, which
// cost a fifth of a step: keep them in the heap below 64 MiB, trim beyond 512 MiB free.
CpuBackend::CpuBackend(int index) : index_(index), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
  static const bool tuned = mallopt(M_MMAP_THRESHOLD, 64 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1;
  (void)tuned;
}

// Running out of memory is the user's batch or model, not a bug: say which and what to do.
// Large requests are compared with what the machine has first, since Linux overcommits:
// an allocation that succeeds can still end the process when its pages are touched.
void* CpuBackend::allocate(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  const std::optional<int64_t> available = bytes >= kCheckedAllocation ? available_host_memory() : std::nullopt;
  void* p = rounded < bytes || (available && bytes > static_cast<size_t>(*available)) ? nullptr
                                                                                      : std::aligned_alloc(kAlignment, rounded);
  if (!p)
    throw UserError(fmt::format("out of memory: cannot allocate {} on {} ({} available); lower "
                                "strategy.per_replica_batch or train.eval_batch, or make the model smaller",
                                format_bytes(static_cast<int64_t>(std::min<size_t>(bytes, INT64_MAX))), device().str(),
                                available ? format_bytes(*available) : std::string("less")));
  return p;
}

void CpuBackend::deallocate(void* p) { std::free(p); }

// An empty tensor may have no storage at all, and memcpy must not see a null pointer.
void CpuBackend::upload(const void* host, Tensor dst) {
  if (dst.bytes() > 0) std::memcpy(dst.data, host, dst.bytes());
}

void CpuBackend::download(const Tensor& src, void* host) {
  if (src.bytes() > 0) std::memcpy(host, src.data, src.bytes());
}

void CpuBackend::copy(const Tensor& src, Tensor dst) {
  check_same_numel(src, dst);
  DT_CHECK(src.dtype == dst.dtype, "copy between dtypes");
  if (src.data == dst.data) return;
  const auto bytes = static_cast<int64_t>(src.bytes());
  if (bytes <= kParallelBytes) return static_cast<void>(std::memcpy(dst.data, src.data, src.bytes()));
  const int64_t chunks = (bytes + kParallelBytes - 1) / kParallelBytes;
  const auto* from = static_cast<const char*>(src.data);
  auto* to = static_cast<char*>(dst.data);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kParallelBytes;
    std::memcpy(to + begin, from + begin, static_cast<size_t>(std::min(kParallelBytes, bytes - begin)));
  }
}

void CpuBackend::fill(Tensor t, float value) {
  check_cpu(t, "fill target");
  float* p = t.f32();
  const int64_t n = t.numel();
#pragma omp parallel for simd schedule(static) if (n * static_cast<int64_t>(sizeof(float)) > kParallelBytes)
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

void CpuBackend::gather_examples(const Tensor& table, const Tensor& rows, Tensor out) {
  const int64_t width = gather_width(table, rows, out), n = rows.numel(), count = table.shape[0];
  const int32_t* index = rows.i32();
  for (int64_t i = 0; i < n; ++i) DT_CHECK(index[i] >= 0 && index[i] < count, "gather row {} of {}", index[i], count);
  if (table.dtype == DType::i32) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(table.i32() + index[i] * width, width, out.i32() + i * width);
    return;
  }
  float* dst = out.f32();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    if (table.dtype == DType::u8)
      std::copy_n(table.u8() + index[i] * width, width, dst + i * width);  // bytes to floats, 0..255
    else
      std::copy_n(table.f32() + index[i] * width, width, dst + i * width);
  }
}

void CpuBackend::gemm(bool ta, bool tb, float alpha, const Tensor& a, const Tensor& b, float beta, Tensor c) {
  const auto [m, k, n] = gemm_dims(ta, tb, a, b, c);
  const dnnl_status_t status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a.f32(), a.shape[1], b.f32(),
                                          b.shape[1], beta, c.f32(), n);
  DT_CHECK(status == dnnl_success, "dnnl_sgemm failed with status {}", static_cast<int>(status));
}

namespace {

constexpr int64_t kBiasColumns = 64;  // columns of a bias gradient a thread sums at once

DT_VECTOR_CLONES void add_bias_rows(float* y, const float* bias, int64_t rows, int64_t c) {
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) y[r * c + j] += bias[j];
}

// Columns [j0, j0 + n) of dy's column sums, in double, rows in order: the same sums on any
// number of threads.
DT_VECTOR_CLONES void bias_grad_columns(const float* dy, int64_t rows, int64_t c, int64_t j0, int64_t n, float* dbias) {
  double acc[kBiasColumns] = {};
  for (int64_t r = 0; r < rows; ++r)
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) acc[j] += dy[r * c + j0 + j];
  for (int64_t j = 0; j < n; ++j) dbias[j0 + j] += static_cast<float>(acc[j]);
}

}  // namespace

void CpuBackend::add_bias(Tensor y, const Tensor& bias, const OutputRounding& rounding) {
  const int64_t c = bias.numel();
  const int64_t rows = y.numel() / c;
  float* py = y.f32();
  const float* pb = bias.f32();
  const int64_t block = std::max<int64_t>(1, kParallelThreshold / std::max<int64_t>(c, 1));  // rows a thread takes at once
  const int64_t blocks = (rows + block - 1) / block;
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) add_bias_rows(py + b * block * c, pb, std::min(block, rows - b * block), c);
  round_output(y, rounding);
}

// Parallel over blocks of columns, each summed over the rows in order.
void CpuBackend::bias_grad(const Tensor& dy, Tensor dbias) {
  const int64_t c = dbias.numel();
  const int64_t rows = dy.numel() / c;
  const float* pdy = dy.f32();
  float* pdb = dbias.f32();
  const int64_t blocks = (c + kBiasColumns - 1) / kBiasColumns;
#pragma omp parallel for schedule(static) if (blocks > 1 && rows * c > kParallelThreshold)
  for (int64_t b = 0; b < blocks; ++b)
    bias_grad_columns(pdy, rows, c, b * kBiasColumns, std::min(kBiasColumns, c - b * kBiasColumns), pdb);
}

void CpuBackend::relu(const Tensor& x, Tensor y) {
  check_same_numel(x, y);
  const float* px = x.f32();
  float* py = y.f32();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) py[i] = px[i] > 0.0f ? px[i] : 0.0f;
}

void CpuBackend::relu_backward(const Tensor& y, const Tensor& dy, Tensor dx) {
  check_same_numel(y, dy);
  check_same_numel(dy, dx);
  const float *py = y.f32(), *pd = dy.f32();
  float* px = dx.f32();
  const int64_t n = y.numel();
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const float g = pd[i];  // read whatever y says, so that the loop vectorises (a blend, no branch)
    px[i] = py[i] > 0.0f ? g : 0.0f;
  }
}

void CpuBackend::scale_shift(const Tensor& x, Tensor y, float scale, float shift) {
  check_same_numel(x, y);
  const float* px = x.f32();
  float* py = y.f32();
  const int64_t n = x.numel();
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) py[i] = px[i] * scale + shift;
}

namespace {

// y = a x + b y on one tile, cloned as adam_tile is (its bandwidth is bench's reference
// for the update's, so both stream the same way).
DT_VECTOR_CLONES void axpby_tile(float a, const float* __restrict x, float b,
                                                                      float* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = a * x[i] + b * y[i];
}

}  // namespace

void CpuBackend::axpby(float a, const Tensor& x, float b, Tensor y) {
  check_same_numel(x, y);
  const float* px = x.f32();
  float* py = y.f32();
  const int64_t n = x.numel();
  constexpr int64_t kTile = 1 << 14;
  const int64_t tiles = (n + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t t = 0; t < tiles; ++t) axpby_tile(a, px + t * kTile, b, py + t * kTile, std::min(kTile, n - t * kTile));
}

void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor y, const OutputRounding& rounding) {
  check_same_numel(a, y);
  check_same_numel(b, y);
  const float *pa = a.f32(), *pb = b.f32();
  float* py = y.f32();
  const int64_t n = y.numel();
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[i];
  round_output(y, rounding);
}

void CpuBackend::dropout(const Tensor& x, Tensor y, float rate, uint64_t seed) {
  check_same_numel(x, y);
  const float* px = x.f32();
  float* py = y.f32();
  const int64_t n = x.numel();
  const float keep_scale = 1.0f / (1.0f - rate);
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) py[i] = uniform_at(seed, static_cast<uint64_t>(i)) >= rate ? px[i] * keep_scale : 0.0f;
}

void CpuBackend::sparse_cross_entropy(const Tensor& logits, const Tensor& labels, bool from_logits, float grad_scale,
                                      Tensor dlogits, Tensor stats) {
  const int64_t n = logits.shape[0];
  const int64_t k = logits.numel() / n;
  DT_CHECK(labels.numel() == n, "{} labels for {} examples", labels.numel(), n);
  const float* z = logits.f32();
  const int32_t* y = labels.i32();
  float* dz = dlogits.empty() ? nullptr : dlogits.f32();
  constexpr float kEps = 1e-7f;  // Keras' clipping of probabilities
  // Checked before the parallel loop: an exception must not leave an OpenMP region.
  for (int64_t i = 0; i < n; ++i) DT_CHECK(y[i] >= 0 && y[i] < k, "label {} outside [0, {})", y[i], k);
  double loss_sum = 0.0;
  int64_t correct = 0;
#pragma omp parallel for reduction(+ : loss_sum, correct) if (n * k > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * k;
    const int32_t label = y[i];
    const int64_t arg = std::max_element(row, row + k) - row;
    correct += arg == label;
    if (from_logits) {
      const float m = row[arg];
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(row[j] - m));
      const double lse = m + std::log(sum);
      loss_sum += lse - row[label];
      if (dz)
        for (int64_t j = 0; j < k; ++j)
          dz[i * k + j] = static_cast<float>((std::exp(row[j] - lse) - (j == label)) * grad_scale);
    } else {
      // Inputs are probabilities: normalise to sum 1, clip, take -log (tf.keras semantics).
      double s = 0.0;
      for (int64_t j = 0; j < k; ++j) s += row[j];
      const double q = row[label] / s;
      const double qc = std::clamp(q, static_cast<double>(kEps), 1.0 - kEps);
      loss_sum += -std::log(qc);
      if (dz) {
        const bool clipped = q != qc;
        for (int64_t j = 0; j < k; ++j) {
          const double g = clipped ? 0.0 : (1.0 / s - (j == label ? 1.0 / row[label] : 0.0));
          dz[i * k + j] = static_cast<float>(g * grad_scale);
        }
      }
    }
  }
  float* st = stats.f32();
  st[0] = static_cast<float>(loss_sum);
  st[1] = static_cast<float>(correct);
}

void CpuBackend::mean_squared_error(const Tensor& pred, const Tensor& labels, float grad_scale, Tensor dpred,
                                    Tensor stats) {
  const int64_t n = pred.shape[0];
  const int64_t k = pred.numel() / n;
  DT_CHECK(labels.numel() == n, "{} labels for {} examples", labels.numel(), n);
  const float* p = pred.f32();
  const int32_t* y = labels.i32();
  float* dp = dpred.empty() ? nullptr : dpred.f32();
  double loss_sum = 0.0;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = p + i * k;
    DT_CHECK(y[i] >= 0 && y[i] < k, "label {} outside [0, {})", y[i], k);
    correct += (std::max_element(row, row + k) - row) == y[i];
    double l = 0.0;
    for (int64_t j = 0; j < k; ++j) {
      const double diff = row[j] - (j == y[i] ? 1.0 : 0.0);
      l += diff * diff;
      if (dp) dp[i * k + j] = static_cast<float>(2.0 * diff / static_cast<double>(k) * grad_scale);
    }
    loss_sum += l / static_cast<double>(k);
  }
  float* st = stats.f32();
  st[0] = static_cast<float>(loss_sum);
  st[1] = static_cast<float>(correct);
}

void CpuBackend::sgd_update(Tensor param, const Tensor& grad, Tensor velocity, const SgdHyper& h) {
  check_same_numel(param, grad);
  float* p = param.f32();
  const float* g = grad.f32();
  float* m = velocity.empty() ? nullptr : velocity.f32();
  const int64_t n = param.numel();
  const float lr = h.learning_rate;
  const float decay = h.weight_decay * lr;
#pragma omp parallel for simd if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    float w = p[i] - p[i] * decay;
    if (m) {
      m[i] = h.momentum * m[i] - lr * g[i];
      w += h.nesterov ? h.momentum * m[i] - lr * g[i] : m[i];
    } else {
      w -= lr * g[i];
    }
    p[i] = w;
  }
}

namespace {

struct AdamTerms {
  float alpha, decay, b1, b2, epsilon;
};

// AdamW on one tile, element by element; cloned for AVX-512 and AVX2 (the loader picks the
// clone this CPU runs) and vectorised 16 or 8 wide. ISO C++ (-std=c++20) leaves
// floating-point contraction off, so every clone rounds as the scalar loop does: the same
// weights on every x86 machine. It reads 16 and writes 12 bytes per parameter.
DT_VECTOR_CLONES void adam_tile(float* __restrict p, const float* __restrict g,
                                                                     float* __restrict m, float* __restrict v, int64_t n,
                                                                     AdamTerms t) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float w = p[i] - p[i] * t.decay;
    m[i] += (g[i] - m[i]) * t.b1;
    v[i] += (g[i] * g[i] - v[i]) * t.b2;
    p[i] = w - t.alpha * m[i] / (std::sqrt(v[i]) + t.epsilon);
  }
}

}  // namespace

// Tiles of 64 KiB per stream, spread over the threads: each thread streams through its
// own contiguous run of the four arrays, so the update runs at memory speed.
void CpuBackend::adam_update(Tensor param, const Tensor& grad, Tensor m, Tensor v, const AdamHyper& h) {
  check_same_numel(param, grad);
  float* p = param.f32();
  const float* g = grad.f32();
  float* pm = m.f32();
  float* pv = v.f32();
  const int64_t n = param.numel();
  const AdamTerms terms{adam_step_size(h), h.weight_decay * h.learning_rate, 1.0f - h.beta_1, 1.0f - h.beta_2, h.epsilon};
  constexpr int64_t kTile = 1 << 14;
  const int64_t tiles = (n + kTile - 1) / kTile;
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t at = t * kTile;
    adam_tile(p + at, g + at, pm + at, pv + at, std::min(kTile, n - at), terms);
  }
}

}  // namespace distrain
