// The CPU backend's transformer ops: embedding, layer norm, GELU and causal attention.
// Loops over rows or (example, head) pairs in parallel; each output element is computed
// by one thread in a fixed order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_bf16.hpp"
#include "core/base/rng.hpp"

namespace distrain {

namespace {

constexpr int64_t kKeyTile = 64;       // keys scored at once: the scores a thread holds

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)

// tanh without a library call, so that GELU's loops vectorise (std::tanh kept them scalar
// and made GELU 1.4% of a GPT-2 124M step per block): tanh(u) = 1 - 2 / (e^2u + 1), e^x as
// 2^k e^r with |r| <= ln 2 / 2 and e^r to degree 7 (relative error below 1e-8); within
// 2e-7 of std::tanh. Past |u| = 9, tanh is 1 in float.
inline float vector_tanh(float u) {
  const float x = 2.0f * (u > 9.0f ? 9.0f : (u < -9.0f ? -9.0f : u));  // a blend (CMakeLists.txt: -fno-trapping-math)
  constexpr float kRound = 12582912.0f;  // 1.5 x 2^23: adding and subtracting rounds to an integer
  const float k = (x * 1.44269504f + kRound) - kRound;
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;  // ln 2 in two parts (Cody-Waite)
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(k) + 127) << 23;  // 2^k, |k| <= 26
  float two_k;
  std::memcpy(&two_k, &bits, sizeof two_k);
  return 1.0f - 2.0f / (p * two_k + 1.0f);
}

float dot(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int64_t d = 0; d < n; ++d) acc += a[d] * b[d];
  return acc;
}

void add_scaled(float* y, float a, const float* x, int64_t n) {
#pragma omp simd
  for (int64_t d = 0; d < n; ++d) y[d] += a * x[d];
}

// Where one head's queries, keys and values sit in a (N, T, 3C) qkv tensor.
struct HeadView {
  int64_t t, c, d;  // sequence, width, head dimension
  int64_t base;     // element of (n, 0, head h's query)
  int64_t q(int64_t i) const { return base + i * 3 * c; }
  int64_t k(int64_t j) const { return base + j * 3 * c + c; }
  int64_t v(int64_t j) const { return base + j * 3 * c + 2 * c; }
};

// One (example, head)'s queries, keys and values as attention reads them: in place where
// qkv is float32; where it is bf16 (Backend::attention), unpacked into `local` (t rows of
// q, k and v), so that no float32 copy of the whole qkv is made.
struct HeadOperands {
  const float* data;
  HeadView view;
};
HeadOperands head_operands(const Tensor& qkv, const HeadView& whole, std::vector<float>& local) {
  if (qkv.dtype != DType::bf16) return {qkv.f32(), whole};
  const auto* packed = static_cast<const uint16_t*>(qkv.data);
  local.resize(static_cast<size_t>(whole.t * 3 * whole.d));
  for (int64_t i = 0; i < whole.t; ++i)
    for (int64_t part = 0; part < 3; ++part)
      for (int64_t e = 0; e < whole.d; ++e)
        local[static_cast<size_t>((i * 3 + part) * whole.d + e)] = from_bf16_bits(packed[whole.q(i) + part * whole.c + e]);
  return {local.data(), HeadView{whole.t, whole.d, whole.d, 0}};
}

// One head's keys (or, `values`, its values) transposed into `out` (d, t): a query's
// scores against a run of keys are then vector loops over the keys, not a dot product
// with a horizontal sum for each key (at a head dimension of 32 those sums were most of
// the Shakespeare GPT's attention).
void transposed(const float* pqkv, const HeadView& hv, bool values, std::vector<float>& out) {
  out.resize(static_cast<size_t>(hv.d * hv.t));
  for (int64_t j = 0; j < hv.t; ++j) {
    const float* row = pqkv + (values ? hv.v(j) : hv.k(j));
    for (int64_t e = 0; e < hv.d; ++e) out[static_cast<size_t>(e * hv.t + j)] = row[e];
  }
}

// out[j - j0] = scale * (x . column j of xt) for j in [j0, j1); xt (d, t) from transposed().
void dot_columns(const float* x, const std::vector<float>& xt, int64_t t, int64_t d, int64_t j0, int64_t j1, float scale,
                 float* out) {
  const int64_t n = j1 - j0;
  std::fill(out, out + n, 0.0f);
  for (int64_t e = 0; e < d; ++e) {
    const float xe = x[e];
    const float* column = xt.data() + e * t + j0;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) out[j] += xe * column[j];
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] *= scale;
}

void check_qkv(const Tensor& qkv, DType operands) {
  DT_CHECK(qkv.dtype != DType::bf16 || operands == DType::bf16, "attention on a bf16 qkv {} takes bf16 operands",
           qkv.shape.str());
}

// The dropout mask of one attention probability: the same draw in forward and backward.
float keep_scale(uint64_t seed, float rate, int64_t row, int64_t t, int64_t j) {
  if (rate <= 0.0f) return 1.0f;
  return uniform_at(seed, static_cast<uint64_t>(row * t + j)) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

}  // namespace

namespace {

// out (n, C) = the rows of table (V, C) for ids [first, first + V), zeros for other ids.
void lookup_rows(const Tensor& table, const Tensor& ids, int64_t first, Tensor out) {
  const int64_t c = table.shape[1], rows = table.shape[0], n = ids.numel();
  DT_CHECK(out.numel() == n * c, "embedding of {} ids into {}", n, out.shape.str());
  const int32_t* id = ids.i32();
  const float* w = table.f32();
  float* y = out.f32();
#pragma omp parallel for if (n > kParallelRows)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = id[i] - first;
    if (row >= 0 && row < rows)
      std::copy_n(w + row * c, c, y + i * c);
    else
      std::fill_n(y + i * c, c, 0.0f);
  }
}

}  // namespace

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
  const int64_t vocab = table.shape[0], n = ids.numel();
  const int32_t* id = ids.i32();
  for (int64_t i = 0; i < n; ++i) DT_CHECK(id[i] >= 0 && id[i] < vocab, "token {} of a vocabulary of {}", id[i], vocab);
  lookup_rows(table, ids, 0, out);
}

void CpuBackend::embedding_backward(const Tensor& ids, const Tensor& dout, Tensor dtable) {
  embedding_slice_backward(ids, 0, dout, dtable);
}

void CpuBackend::embedding_slice(const Tensor& table, const Tensor& ids, int64_t first, Tensor out) {
  const int32_t* id = ids.i32();
  for (int64_t i = 0; i < ids.numel(); ++i) DT_CHECK(id[i] >= 0, "token {}", id[i]);  // past the vocabulary: refused by preflight
  lookup_rows(table, ids, first, out);
}

// Serial over ids: two positions with one token add into the same row, in a fixed order.
void CpuBackend::embedding_slice_backward(const Tensor& ids, int64_t first, const Tensor& dout, Tensor dtable) {
  const int64_t c = dtable.shape[1], rows = dtable.shape[0], n = ids.numel();
  const int32_t* id = ids.i32();
  const float* dy = dout.f32();
  float* dw = dtable.f32();
  for (int64_t i = 0; i < n; ++i)
    if (const int64_t row = id[i] - first; row >= 0 && row < rows) add_scaled(dw + row * c, 1.0f, dy + i * c, c);
}

void CpuBackend::layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float epsilon, Tensor y,
                            Tensor mean, Tensor rstd, const OutputRounding& rounding) {
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  const float *px = x.f32(), *g = gamma.f32(), *b = beta.f32();
  float *py = y.f32(), *pm = mean.f32(), *pr = rstd.f32();
#pragma omp parallel for if (rows > kParallelRows)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = px + r * c;
    double sum = 0.0, squares = 0.0;
    for (int64_t j = 0; j < c; ++j) sum += xr[j];
    const double mu = sum / static_cast<double>(c);
    for (int64_t j = 0; j < c; ++j) squares += (xr[j] - mu) * (xr[j] - mu);
    const auto m = static_cast<float>(mu);
    const auto s = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(c) + epsilon));
    pm[r] = m;
    pr[r] = s;
    for (int64_t j = 0; j < c; ++j) py[r * c + j] = (xr[j] - m) * s * g[j] + b[j];
  }
  round_output(y, rounding);
}

void CpuBackend::layer_norm_backward(const Tensor& x, const Tensor& dy, const Tensor& gamma, const Tensor& mean,
                                     const Tensor& rstd, Tensor dx, Tensor dgamma, Tensor dbeta) {
  const int64_t c = gamma.numel(), rows = x.numel() / c;
  const float *px = x.f32(), *pdy = dy.f32(), *g = gamma.f32(), *pm = mean.f32(), *pr = rstd.f32();
  float *pdx = dx.empty() ? nullptr : dx.f32(), *dg = dgamma.f32(), *db = dbeta.f32();
  // The parameter gradients sum over rows in order (rows outer), as bias_grad.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const float norm = (px[r * c + j] - pm[r]) * pr[r];
      dg[j] += pdy[r * c + j] * norm;
      db[j] += pdy[r * c + j];
    }
  if (!pdx) return;
#pragma omp parallel for if (rows > kParallelRows)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = px + r * c, *dyr = pdy + r * c;
    float mean_dn = 0.0f, mean_dn_norm = 0.0f;  // means of dnorm and dnorm * norm over the row
    for (int64_t j = 0; j < c; ++j) {
      const float dn = dyr[j] * g[j];
      mean_dn += dn;
      mean_dn_norm += dn * (xr[j] - pm[r]) * pr[r];
    }
    mean_dn /= static_cast<float>(c);
    mean_dn_norm /= static_cast<float>(c);
    for (int64_t j = 0; j < c; ++j) {
      const float norm = (xr[j] - pm[r]) * pr[r];
      pdx[r * c + j] = (dyr[j] * g[j] - mean_dn - norm * mean_dn_norm) * pr[r];
    }
  }
}

void CpuBackend::gelu(const Tensor& x, Tensor y, const OutputRounding& rounding) {
  check_same_numel(x, y);
  const int64_t n = x.numel();
  const float* px = x.f32();
  float* py = y.f32();
#pragma omp parallel for simd if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const float v = px[i];
    py[i] = 0.5f * v * (1.0f + vector_tanh(kGeluC * (v + 0.044715f * v * v * v)));
  }
  round_output(y, rounding);
}

void CpuBackend::gelu_backward(const Tensor& x, const Tensor& dy, Tensor dx) {
  check_same_numel(x, dx);
  const int64_t n = x.numel();
  const float *px = x.f32(), *pdy = dy.f32();
  float* pdx = dx.f32();
#pragma omp parallel for simd if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const float v = px[i];
    const float t = vector_tanh(kGeluC * (v + 0.044715f * v * v * v));
    const float slope = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * 0.044715f * v * v);
    pdx[i] = pdy[i] * slope;
  }
}

namespace {
// x as a product's operand: rounded to bf16 under those operands (Backend::attention).
float attention_operand(DType operands, float x) {
  return operands == DType::bf16 ? from_bf16_bits(to_bf16_bits(x)) : x;
}
}  // namespace

namespace {

// One (example, head) of attention (CpuBackend::attention): each query row scores the keys
// up to itself a tile at a time with an online softmax (running maximum and sum, the
// output rescaled as the maximum grows): the GPU's tiles of 64 keys, so that bf16
// probabilities are rounded from the same values. Cloned for AVX-512 and AVX2, as the
// element-wise loops of a small head (d = 32) are most of its time.
struct AttentionHead {
  const float* qkv;  // the head's operands (head_operands)
  HeadView hv;
  int64_t b, h, nh, c;
  DType operands;
  float rate, scale;
  uint64_t seed;
};

[[gnu::target_clones("avx512f", "avx2", "default")]] void attend(const AttentionHead& a, std::vector<float>& keys,
                                                                  float* po, float* plse) {
  const int64_t t = a.hv.t, d = a.hv.d;
  transposed(a.qkv, a.hv, false, keys);
  float scores[kKeyTile];
  for (int64_t i = 0; i < t; ++i) {
    float* o = po + (a.b * t + i) * a.c + a.h * d;
    std::fill(o, o + d, 0.0f);
    const float* q = a.qkv + a.hv.q(i);
    float running_max = -INFINITY, sum = 0.0f;
    for (int64_t j0 = 0; j0 <= i; j0 += kKeyTile) {
      const int64_t j1 = std::min(i + 1, j0 + kKeyTile);
      dot_columns(q, keys, t, d, j0, j1, a.scale, scores);
      float tile_max = running_max;
      for (int64_t j = j0; j < j1; ++j) tile_max = std::max(tile_max, scores[j - j0]);
      const float rescale = std::exp(running_max - tile_max);
      sum *= rescale;
      for (int64_t e = 0; e < d; ++e) o[e] *= rescale;
      for (int64_t j = j0; j < j1; ++j) {
        const float p = std::exp(scores[j - j0] - tile_max);
        sum += p;
        add_scaled(o, attention_operand(a.operands, p * keep_scale(a.seed, a.rate, a.nh * t + i, t, j)), a.qkv + a.hv.v(j), d);
      }
      running_max = tile_max;
    }
    for (int64_t e = 0; e < d; ++e) o[e] /= sum;
    plse[a.nh * t + i] = running_max + std::log(sum);
  }
}

}  // namespace

void CpuBackend::attention(const Tensor& qkv, int64_t heads, DType operands, float rate, uint64_t seed, Tensor out,
                           Tensor lse) {
  const int64_t n = qkv.shape[0], t = qkv.shape[1], c = qkv.shape[2] / 3, d = c / heads;
  DT_CHECK(qkv.shape[2] == 3 * c && c % heads == 0, "attention over {} with {} heads", qkv.shape.str(), heads);
  check_qkv(qkv, operands);
  float *po = out.f32(), *plse = lse.f32();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> local, keys;  // a thread's head of a bf16 qkv, its keys transposed (firstprivate: one each)
#pragma omp parallel for schedule(dynamic) firstprivate(local, keys)
  for (int64_t nh = 0; nh < n * heads; ++nh) {
    const int64_t b = nh / heads, h = nh % heads;
    const auto [pqkv, hv] = head_operands(qkv, HeadView{t, c, d, b * t * 3 * c + h * d}, local);
    attend(AttentionHead{pqkv, hv, b, h, nh, c, operands, rate, scale, seed}, keys, po, plse);
  }
}

namespace {

// One (example, head) of flash attention's backward: probabilities recomputed from the
// kept log-sum-exp; with D_i = dout_i . out_i, dscore_ij = p_ij (dp_ij - D_i). `whole`:
// where the head's gradients are written in dqkv. Cloned as attend() is.
[[gnu::target_clones("avx512f", "avx2", "default")]] void attend_backward(const AttentionHead& a, const HeadView& whole,
                                                                           const float* po, const float* plse,
                                                                           const float* pdo, float* pd,
                                                                           std::vector<float>& keys,
                                                                           std::vector<float>& values) {
  const int64_t t = a.hv.t, d = a.hv.d;
  transposed(a.qkv, a.hv, false, keys);
  transposed(a.qkv, a.hv, true, values);
  std::vector<float> dout_operand(static_cast<size_t>(d)), scores(static_cast<size_t>(t)), dp(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) {
    std::fill(pd + whole.q(i), pd + whole.q(i) + d, 0.0f);
    std::fill(pd + whole.k(i), pd + whole.k(i) + d, 0.0f);
    std::fill(pd + whole.v(i), pd + whole.v(i) + d, 0.0f);
  }
  for (int64_t i = 0; i < t; ++i) {
    const float* q = a.qkv + a.hv.q(i);
    const float* dout_i = pdo + (a.b * t + i) * a.c + a.h * d;
    const float big_d = dot(dout_i, po + (a.b * t + i) * a.c + a.h * d, d);
    const float row_lse = plse[a.nh * t + i];
    for (int64_t e = 0; e < d; ++e) dout_operand[e] = attention_operand(a.operands, dout_i[e]);
    dot_columns(q, keys, t, d, 0, i + 1, a.scale, scores.data());             // (i + 1) scaled scores
    dot_columns(dout_operand.data(), values, t, d, 0, i + 1, 1.0f, dp.data());  // dout_i . v_j
    for (int64_t j = 0; j <= i; ++j) {
      const float p = std::exp(scores[j] - row_lse);
      const float keep = keep_scale(a.seed, a.rate, a.nh * t + i, t, j);
      add_scaled(pd + whole.v(j), attention_operand(a.operands, p * keep), dout_operand.data(), d);
      const float ds = attention_operand(a.operands, p * (dp[j] * keep - big_d) * a.scale);
      add_scaled(pd + whole.q(i), ds, a.qkv + a.hv.k(j), d);
      add_scaled(pd + whole.k(j), ds, q, d);
    }
  }
}

}  // namespace

// Threads own whole (example, head) pairs, so dK and dV accumulate without races.
void CpuBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                                    int64_t heads, DType operands, float rate, uint64_t seed, Tensor dqkv) {
  const int64_t n = qkv.shape[0], t = qkv.shape[1], c = qkv.shape[2] / 3, d = c / heads;
  check_qkv(qkv, operands);
  const float *po = out.f32(), *plse = lse.f32(), *pdo = dout.f32();
  float* pd = dqkv.f32();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> local, keys, values;  // a thread's head of a bf16 qkv, its keys and values transposed
#pragma omp parallel for schedule(dynamic) firstprivate(local, keys, values)
  for (int64_t nh = 0; nh < n * heads; ++nh) {
    const int64_t b = nh / heads, h = nh % heads;
    const HeadView whole{t, c, d, b * t * 3 * c + h * d};  // where dqkv is written
    const auto [pqkv, hv] = head_operands(qkv, whole, local);  // what is read
    attend_backward(AttentionHead{pqkv, hv, b, h, nh, c, operands, rate, scale, seed}, whole, po, plse, pdo, pd, keys, values);
  }
}

}  // namespace distrain
