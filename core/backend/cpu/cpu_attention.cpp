// The CPU backend's causal multi-head attention (Backend::attention), flash-style: a head's
// scores are never held whole, only a tile of 64 keys per query (the GPU's tiles, so that
// bf16 probabilities are rounded from the same values). Threads own whole (example, head)
// pairs and every output element is summed in a fixed order, so results do not depend on the
// thread count. The per-head work is cloned for AVX-512 and AVX2 (DT_VECTOR_CLONES): at the
// small heads of a small GPT (d = 32) its vector loops are most of the layer's time.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/cpu_bf16.hpp"
#include "core/backend/cpu/cpu_vector_math.hpp"
#include "core/base/rng.hpp"

namespace distrain {

namespace {

constexpr int64_t kKeyTile = 64;       // keys scored at once
constexpr int64_t kQueryBlock = 256;   // queries whose probabilities the backward holds for a key tile

// Where one query head's queries, and the keys and values it reads, sit in a qkv tensor
// (N, T, (H + 2 KV) D): all heads' queries, then the KV key heads, then the value heads.
// Query head h reads key and value head h mod KV (grouped-query attention; KV = H for
// multi-head attention, GPT-2's [q | k | v]).
struct HeadView {
  int64_t t, stride, d;          // sequence, row width, head dimension
  int64_t q_base, k_base, v_base;  // elements of (n, 0, the head's query, key, value)
  int64_t q(int64_t i) const { return q_base + i * stride; }
  int64_t k(int64_t j) const { return k_base + j * stride; }
  int64_t v(int64_t j) const { return v_base + j * stride; }
  int64_t row_stride() const { return stride; }
};

// The heads of a qkv (N, T, (H + 2 KV) D).
struct QkvGeometry {
  int64_t n, t, heads, kv_heads, d;
  int64_t width() const { return (heads + 2 * kv_heads) * d; }
  HeadView head(int64_t b, int64_t h) const {
    const int64_t row0 = b * t * width(), kv = h % kv_heads;
    return HeadView{t, width(), d, row0 + h * d, row0 + (heads + kv) * d, row0 + (heads + kv_heads + kv) * d};
  }
};

QkvGeometry qkv_geometry(const Tensor& qkv, int64_t heads, int64_t kv_heads) {
  DT_CHECK(qkv.shape.rank() == 3 && heads > 0 && kv_heads > 0 && heads % kv_heads == 0 &&
               qkv.shape[2] % (heads + 2 * kv_heads) == 0,
           "attention over {} with {} heads and {} key/value heads", qkv.shape.str(), heads, kv_heads);
  return QkvGeometry{qkv.shape[0], qkv.shape[1], heads, kv_heads, qkv.shape[2] / (heads + 2 * kv_heads)};
}

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
  const int64_t d = whole.d;
  local.resize(static_cast<size_t>(whole.t * 3 * d));
  for (int64_t i = 0; i < whole.t; ++i)
    for (int64_t e = 0; e < d; ++e) {
      local[static_cast<size_t>(i * 3 * d + e)] = from_bf16_bits(packed[whole.q(i) + e]);
      local[static_cast<size_t>(i * 3 * d + d + e)] = from_bf16_bits(packed[whole.k(i) + e]);
      local[static_cast<size_t>(i * 3 * d + 2 * d + e)] = from_bf16_bits(packed[whole.v(i) + e]);
    }
  return {local.data(), HeadView{whole.t, 3 * d, d, 0, d, 2 * d}};
}

void check_qkv(const Tensor& qkv, DType operands) {
  DT_CHECK(qkv.dtype != DType::bf16 || operands == DType::bf16, "attention on a bf16 qkv {} takes bf16 operands",
           qkv.shape.str());
}

// One head's keys (or, `values`, its values) transposed into `out` (d, t): a query's
// scores against a run of keys are then vector loops over the keys, not a dot product
// with a horizontal sum for each key.
void transposed(const float* pqkv, const HeadView& hv, bool values, std::vector<float>& out) {
  out.resize(static_cast<size_t>(hv.d * hv.t + kKeyTile));  // the padding dot_columns reads past the end
  for (int64_t j = 0; j < hv.t; ++j) {
    const float* row = pqkv + (values ? hv.v(j) : hv.k(j));
    for (int64_t e = 0; e < hv.d; ++e) out[static_cast<size_t>(e * hv.t + j)] = row[e];
  }
}

// The dropout mask of one attention probability: the same draw in forward and backward.
[[gnu::always_inline]] inline float keep_scale(uint64_t seed, float rate, int64_t row, int64_t t, int64_t j) {
  if (rate <= 0.0f) return 1.0f;
  return uniform_at(seed, static_cast<uint64_t>(row * t + j)) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

// x as a product's operand: rounded to bf16 under those operands (Backend::attention).
[[gnu::always_inline]] inline float attention_operand(DType operands, float x) {
  return operands == DType::bf16 ? from_bf16_bits(to_bf16_bits(x)) : x;
}

// The helpers below are inlined into the cloned per-head functions, and so compiled for
// each clone's vectors.

// A tile's loops run over n rounded up to whole vectors (dot_columns' lanes), the lanes past
// n masked: GCC's scalar remainder loop would otherwise take up to 15 keys of every row, most
// of a short row's work.
inline int64_t whole_vectors(int64_t n) { return (n + 15) / 16 * 16; }

// out[j] = scale * (x . column j0 + j of xt) for j < n; xt (d, t) from transposed(), whose
// kKeyTile floats of padding let the last tile read whole lanes. L lanes (n rounded up to
// 16) are summed in registers.
template <int64_t L>
[[gnu::always_inline]] inline void dot_columns_lanes(const float* __restrict x, const float* __restrict xt, int64_t t,
                                                     int64_t d, int64_t j0, float scale, float* __restrict out) {
  float acc[L] = {};
  for (int64_t e = 0; e < d; ++e) {
    const float xe = x[e];
    const float* column = xt + e * t + j0;
#pragma omp simd
    for (int64_t j = 0; j < L; ++j) acc[j] += xe * column[j];
  }
#pragma omp simd
  for (int64_t j = 0; j < L; ++j) out[j] = acc[j] * scale;
}

[[gnu::always_inline]] inline void dot_columns(const float* x, const float* xt, int64_t t, int64_t d, int64_t j0,
                                               int64_t n, float scale, float* out) {
  static_assert(kKeyTile == 64);
  switch (whole_vectors(n) / 16) {
    case 1: return dot_columns_lanes<16>(x, xt, t, d, j0, scale, out);
    case 2: return dot_columns_lanes<32>(x, xt, t, d, j0, scale, out);
    case 3: return dot_columns_lanes<48>(x, xt, t, d, j0, scale, out);
    default: return dot_columns_lanes<64>(x, xt, t, d, j0, scale, out);
  }
}

// out[e] += sum over j < n of w[j * w_stride] * rows[j * row_stride + e], for e < D: the D
// lanes stay in registers over all rows, even and odd rows summed apart where registers
// allow (two chains of FMAs, not one).
template <int64_t D>
[[gnu::always_inline]] inline void add_weighted_rows_lanes(float* __restrict out, const float* __restrict w,
                                                           int64_t w_stride, const float* __restrict rows,
                                                           int64_t row_stride, int64_t n) {
  constexpr int64_t kChains = D <= 64 ? 2 : 1;
  float acc[kChains][D] = {};
  int64_t j = 0;
  for (; j + kChains <= n; j += kChains)
    for (int64_t k = 0; k < kChains; ++k) {
      const float wj = w[(j + k) * w_stride];
      const float* row = rows + (j + k) * row_stride;
#pragma omp simd
      for (int64_t e = 0; e < D; ++e) acc[k][e] += wj * row[e];
    }
  for (; j < n; ++j) {
    const float wj = w[j * w_stride];
#pragma omp simd
    for (int64_t e = 0; e < D; ++e) acc[0][e] += wj * rows[j * row_stride + e];
  }
  for (int64_t k = 0; k < kChains; ++k)
#pragma omp simd
    for (int64_t e = 0; e < D; ++e) out[e] += acc[k][e];
}

// add_weighted_rows_lanes for any width d: sixteen lanes at a time, then the rest.
[[gnu::always_inline]] inline void add_weighted_rows(float* out, const float* w, int64_t w_stride, const float* rows,
                                                     int64_t row_stride, int64_t n, int64_t d) {
  switch (d) {
    case 32: return add_weighted_rows_lanes<32>(out, w, w_stride, rows, row_stride, n);
    case 64: return add_weighted_rows_lanes<64>(out, w, w_stride, rows, row_stride, n);
    case 128: return add_weighted_rows_lanes<128>(out, w, w_stride, rows, row_stride, n);
    default: break;
  }
  int64_t e0 = 0;
  for (; e0 + 16 <= d; e0 += 16) add_weighted_rows_lanes<16>(out + e0, w, w_stride, rows + e0, row_stride, n);
  for (int64_t e = e0; e < d; ++e) {
    float acc = 0.0f;
    for (int64_t j = 0; j < n; ++j) acc += w[j * w_stride] * rows[j * row_stride + e];
    out[e] += acc;
  }
}

[[gnu::always_inline]] inline float largest(const float* x, int64_t n, float start) {
  float m = start;
  const int64_t lanes = whole_vectors(n);
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < lanes; ++j) m = j < n && x[j] > m ? x[j] : m;
  return m;
}

// x[j] = e^(x[j] - shift) for j < n, 0 up to whole vectors; returns their sum.
[[gnu::always_inline]] inline float exponentiate(float* x, int64_t n, float shift) {
  float sum = 0.0f;
  const int64_t lanes = whole_vectors(n);
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < lanes; ++j) {
    x[j] = j < n ? vector_exp(x[j] - shift) : 0.0f;
    sum += x[j];
  }
  return sum;
}

// One (example, head), its operands and where its rows of out, lse and the gradients sit.
struct AttentionHead {
  const float* qkv;  // the head's operands (head_operands)
  HeadView hv;
  int64_t b, h, nh, c;
  DType operands;
  float rate, scale;
  uint64_t seed;
  int64_t row(int64_t i) const { return (b * hv.t + i) * c + h * hv.d; }  // of out and dout (N, T, C)
  int64_t lse(int64_t i) const { return nh * hv.t + i; }                 // of lse (N, H, T)
};

// Probabilities p[j] of keys j0 + j as the value product's operands: dropout's keep scale
// and bf16 rounding applied.
[[gnu::always_inline]] inline void as_value_weights(const AttentionHead& a, int64_t i, int64_t j0, float* p, int64_t n) {
  if (a.rate > 0.0f)
    for (int64_t j = 0; j < n; ++j) p[j] *= keep_scale(a.seed, a.rate, a.lse(i), a.hv.t, j0 + j);
  if (a.operands == DType::bf16)
    for (int64_t j = 0; j < n; ++j) p[j] = attention_operand(a.operands, p[j]);
}

// Forward: each query row scores the keys up to itself a tile at a time with an online
// softmax (running maximum and sum, the output rescaled as the maximum grows).
DT_VECTOR_CLONES void attend(const AttentionHead& a, std::vector<float>& keys, float* po, float* plse) {
  const int64_t t = a.hv.t, d = a.hv.d;
  transposed(a.qkv, a.hv, false, keys);
  float p[kKeyTile];
  for (int64_t i = 0; i < t; ++i) {
    float* o = po + a.row(i);
    std::fill(o, o + d, 0.0f);
    float running_max = -INFINITY, sum = 0.0f;
    for (int64_t j0 = 0; j0 <= i; j0 += kKeyTile) {
      const int64_t n = std::min(i + 1 - j0, kKeyTile);
      dot_columns(a.qkv + a.hv.q(i), keys.data(), t, d, j0, n, a.scale, p);
      const float tile_max = largest(p, n, running_max);
      const float rescale = std::exp(running_max - tile_max);
      sum = sum * rescale + exponentiate(p, n, tile_max);
      for (int64_t e = 0; e < d; ++e) o[e] *= rescale;
      as_value_weights(a, i, j0, p, n);
      add_weighted_rows(o, p, 1, a.qkv + a.hv.v(j0), a.hv.row_stride(), n, d);
      running_max = tile_max;
    }
    for (int64_t e = 0; e < d; ++e) o[e] /= sum;
    plse[a.lse(i)] = running_max + std::log(sum);
  }
}

// What a thread keeps between the (example, head) pairs of the backward.
struct BackwardScratch {
  std::vector<float> keys, values;  // transposed (d, t)
  std::vector<float> dout;          // the head's output gradients as operands (t, d)
  std::vector<float> big_d;         // D_i = dout_i . out_i
  std::vector<float> p, ds;         // a query block's probabilities and score gradients, kKeyTile a row
};

// Probabilities (as value weights) and score gradients of query i against keys j0 + j,
// j < n, from the scores in p and dout_i . v_j in ds: dscore = p (dp - D_i) scale.
[[gnu::always_inline]] inline void probabilities_and_score_grads(const AttentionHead& a, int64_t i, int64_t j0,
                                                                 int64_t n, float lse, float big_d, float* p,
                                                                 float* ds) {
  if (a.rate <= 0.0f && a.operands == DType::f32) {
    const int64_t lanes = whole_vectors(n);
#pragma omp simd
    for (int64_t j = 0; j < lanes; ++j) {
      const float pj = j < n ? vector_exp(p[j] - lse) : 0.0f;
      p[j] = pj;
      ds[j] = j < n ? pj * (ds[j] - big_d) * a.scale : 0.0f;
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const float pj = vector_exp(p[j] - lse);
    const float keep = keep_scale(a.seed, a.rate, a.lse(i), a.hv.t, j0 + j);
    p[j] = attention_operand(a.operands, pj * keep);
    ds[j] = attention_operand(a.operands, pj * (ds[j] * keep - big_d) * a.scale);
  }
}

// Backward: probabilities recomputed from the kept log-sum-exp. For each tile of keys and
// block of queries: dQ's rows as each query's probabilities are made, then dV and dK's rows
// of the tile over the block's queries. `whole`: where the head's gradients sit in dqkv;
// the key and value rows are added into, after being cleared by the first query head of
// their group (`first_of_group`).
DT_VECTOR_CLONES void attend_backward(const AttentionHead& a, const HeadView& whole, bool first_of_group,
                                      const float* po, const float* plse, const float* pdo, float* pd,
                                      BackwardScratch& s) {
  const int64_t t = a.hv.t, d = a.hv.d, stride = a.hv.row_stride();
  transposed(a.qkv, a.hv, false, s.keys);
  transposed(a.qkv, a.hv, true, s.values);
  s.dout.resize(static_cast<size_t>(t * d));
  s.big_d.resize(static_cast<size_t>(t));
  s.p.resize(static_cast<size_t>(kQueryBlock * kKeyTile));
  s.ds.resize(static_cast<size_t>(kQueryBlock * kKeyTile));
  for (int64_t i = 0; i < t; ++i) {
    const float* dout_i = pdo + a.row(i);
    float big_d = 0.0f;
    for (int64_t e = 0; e < d; ++e) big_d += dout_i[e] * po[a.row(i) + e];
    s.big_d[i] = big_d;
    for (int64_t e = 0; e < d; ++e) s.dout[i * d + e] = attention_operand(a.operands, dout_i[e]);
    std::fill(pd + whole.q(i), pd + whole.q(i) + d, 0.0f);
    if (!first_of_group) continue;
    std::fill(pd + whole.k(i), pd + whole.k(i) + d, 0.0f);
    std::fill(pd + whole.v(i), pd + whole.v(i) + d, 0.0f);
  }
  for (int64_t j0 = 0; j0 < t; j0 += kKeyTile) {
    const int64_t n = std::min(kKeyTile, t - j0);
    for (int64_t i0 = j0; i0 < t; i0 += kQueryBlock) {
      const int64_t i1 = std::min(t, i0 + kQueryBlock);
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t m = std::min(n, i + 1 - j0);  // keys of the tile up to query i
        float* p = s.p.data() + (i - i0) * kKeyTile;
        float* ds = s.ds.data() + (i - i0) * kKeyTile;
        dot_columns(a.qkv + a.hv.q(i), s.keys.data(), t, d, j0, m, a.scale, p);
        dot_columns(s.dout.data() + i * d, s.values.data(), t, d, j0, m, 1.0f, ds);
        probabilities_and_score_grads(a, i, j0, m, plse[a.lse(i)], s.big_d[i], p, ds);
        add_weighted_rows(pd + whole.q(i), ds, 1, a.qkv + a.hv.k(j0), stride, m, d);
      }
      for (int64_t j = j0; j < j0 + n; ++j) {
        const int64_t first = std::max(j, i0);  // queries that see key j
        if (first >= i1) continue;
        const int64_t at = (first - i0) * kKeyTile + (j - j0);
        add_weighted_rows(pd + whole.v(j), s.p.data() + at, kKeyTile, s.dout.data() + first * d, d, i1 - first, d);
        add_weighted_rows(pd + whole.k(j), s.ds.data() + at, kKeyTile, a.qkv + a.hv.q(first), stride, i1 - first, d);
      }
    }
  }
}

}  // namespace

void CpuBackend::attention(const Tensor& qkv, int64_t heads, int64_t kv_heads, DType operands, float rate, uint64_t seed,
                           Tensor out, Tensor lse) {
  const QkvGeometry g = qkv_geometry(qkv, heads, kv_heads);
  check_qkv(qkv, operands);
  float *po = out.f32(), *plse = lse.f32();
  const float scale = 1.0f / std::sqrt(static_cast<float>(g.d));
  std::vector<float> local, keys;  // a thread's head of a bf16 qkv, its keys transposed (firstprivate: one each)
#pragma omp parallel for schedule(dynamic) firstprivate(local, keys)
  for (int64_t nh = 0; nh < g.n * heads; ++nh) {
    const int64_t b = nh / heads, h = nh % heads;
    const auto [pqkv, hv] = head_operands(qkv, g.head(b, h), local);
    attend(AttentionHead{pqkv, hv, b, h, nh, heads * g.d, operands, rate, scale, seed}, keys, po, plse);
  }
}

// Threads own whole (example, key/value head) groups: a group's query heads add into the
// same key and value gradients, in a fixed order.
void CpuBackend::attention_backward(const Tensor& qkv, const Tensor& out, const Tensor& lse, const Tensor& dout,
                                    int64_t heads, int64_t kv_heads, DType operands, float rate, uint64_t seed,
                                    Tensor dqkv) {
  const QkvGeometry g = qkv_geometry(qkv, heads, kv_heads);
  check_qkv(qkv, operands);
  const float *po = out.f32(), *plse = lse.f32(), *pdo = dout.f32();
  float* pd = dqkv.f32();
  const float scale = 1.0f / std::sqrt(static_cast<float>(g.d));
  std::vector<float> local;  // a thread's head of a bf16 qkv
  BackwardScratch scratch;
#pragma omp parallel for schedule(dynamic) firstprivate(local, scratch)
  for (int64_t group = 0; group < g.n * kv_heads; ++group) {
    const int64_t b = group / kv_heads;
    for (int64_t h = group % kv_heads; h < heads; h += kv_heads) {
      const HeadView whole = g.head(b, h);                        // where dqkv is written
      const auto [pqkv, hv] = head_operands(qkv, whole, local);  // what is read
      attend_backward(AttentionHead{pqkv, hv, b, h, b * heads + h, heads * g.d, operands, rate, scale, seed}, whole,
                      h < kv_heads, po, plse, pdo, pd, scratch);
    }
  }
}

}  // namespace distrain
