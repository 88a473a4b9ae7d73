// Causal attention in float32 as flash attention: each block takes a tile of 64 queries (or
// keys) of one (example, head), walks the tiles of 64 keys (queries) the causal mask leaves,
// and keeps the tiles in shared memory, so no (T, T) score matrix exists and the masked half
// is never computed. Forward: an online softmax (running maximum and sum per row, the output
// rescaled as the maximum grows), the CPU twin's formula. Backward, without atomics: one
// kernel per key tile sums dK and dV over the queries after it, one per query tile sums dQ
// over the keys before it, both recomputing the probabilities from the kept log-sum-exp.
//
// 256 threads as a 16 x 16 grid: thread (ty, tx) holds rows 4 ty .. 4 ty + 3 of the tile
// and, of a score tile, columns tx + 16 b (b < 4); of a (64, d) tile, columns tx + 16 b
// (b < d / 16). A row's 16 threads share a half-warp, so row sums are butterfly shuffles.
// Under bf16 operands attention() and attention_backward() take the tensor-core kernels
// of attention_bf16_kernels.cu instead.
#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"
#include "core/backend/cuda/attention_geometry.cuh"

namespace distrain::cuda {

namespace {

constexpr int kThreads = 256, kRows = 4;
constexpr int kScoreLd = kTile + 1;  // padded rows: a column read by 16 threads hits 16 banks

__device__ int ty() { return static_cast<int>(threadIdx.x) / 16; }
__device__ int tx() { return static_cast<int>(threadIdx.x) % 16; }

// Rows [first, first + 64) of a head's (t, d) rows into shared memory, zeros past t.
__device__ void load_tile(float* tile, int64_t first, const HeadGeometry& g, HeadRows<const float> rows) {
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * g.d; idx += kThreads) {
    const int r = idx / g.d, e = idx % g.d;
    const int64_t i = first + r;
    tile[r * g.ld + e] = i < g.t ? rows(i, e) : 0.0f;
  }
}

// Keys and values of tokens [first, first + 64) of head nh.
__device__ void load_keys_values(float* ks, float* vs, const float* qkv, int64_t nh, int64_t first,
                                 const HeadGeometry& g) {
  load_tile(ks, first, g, qkv_rows(qkv, nh, 1, g));
  load_tile(vs, first, g, qkv_rows(qkv, nh, 2, g));
}

// Queries and output gradients of tokens [first, first + 64) of head nh.
__device__ void load_queries_grads(float* qs, float* gs, const float* qkv, const float* dout, int64_t nh,
                                   int64_t first, const HeadGeometry& g) {
  load_tile(qs, first, g, qkv_rows(qkv, nh, 0, g));
  load_tile(gs, first, g, out_rows(dout, nh, g));
}

// A thread's rows of a (64, d) result for the tile from `first`, rows past t left out:
// put(a, row, col, value).
template <int Cols, typename Put>
__device__ void store_rows(const float (&acc)[kRows][Cols], int64_t first, const HeadGeometry& g, Put put) {
#pragma unroll
  for (int a = 0; a < kRows; ++a) {
    const int64_t i = first + ty() * kRows + a;
    if (i >= g.t) continue;
#pragma unroll
    for (int b = 0; b < Cols; ++b)
      if (const int col = tx() + 16 * b; col < g.d) put(a, i, col, acc[a][b]);
  }
}

// s[a][b] = row (4 ty + a) of x . row (tx + 16 b) of y, over d.
__device__ void tile_dots(const float* x, const float* y, const HeadGeometry& g, float (&s)[kRows][4]) {
#pragma unroll
  for (int a = 0; a < kRows; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) s[a][b] = 0.0f;
  for (int e = 0; e < g.d; ++e) {
    float xa[kRows], yb[4];
#pragma unroll
    for (int a = 0; a < kRows; ++a) xa[a] = x[(ty() * kRows + a) * g.ld + e];
#pragma unroll
    for (int b = 0; b < 4; ++b) yb[b] = y[(tx() + 16 * b) * g.ld + e];
#pragma unroll
    for (int a = 0; a < kRows; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) s[a][b] += xa[a] * yb[b];
  }
}

// acc[a][b] += sum over k of w[4 ty + a][k] m[k][tx + 16 b]: a score-shaped tile w (64, 64)
// times a (64, d) tile m. Cols: a thread's columns of a (64, d) tile, d / 16 rounded up to
// a size compiled for (registers are held for all of them).
template <int Cols>
__device__ void tile_product(const float* w, const float* m, const HeadGeometry& g, float (&acc)[kRows][Cols]) {
  for (int k = 0; k < kTile; ++k) {
    float wa[kRows];
#pragma unroll
    for (int a = 0; a < kRows; ++a) wa[a] = w[(ty() * kRows + a) * kScoreLd + k];
#pragma unroll
    for (int b = 0; b < Cols; ++b) {
      const int col = tx() + 16 * b;
      if (col < g.d) {
        const float v = m[k * g.ld + col];
#pragma unroll
        for (int a = 0; a < kRows; ++a) acc[a][b] += wa[a] * v;
      }
    }
  }
}

__device__ float half_warp_sum(float v) {
  for (int offset = 8; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ float half_warp_max(float v) {
  for (int offset = 8; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

template <int Cols>
__global__ void __launch_bounds__(kThreads) attention_forward_kernel(const float* qkv, HeadGeometry g, float scale,
                                                                     float rate, uint64_t seed, float* out, float* lse) {
  extern __shared__ float smem[];
  float *qs = smem, *ks = qs + kTile * g.ld, *vs = ks + kTile * g.ld, *ps = vs + kTile * g.ld;
  const int64_t nh = blockIdx.y, q0 = query_tile_first();
  load_tile(qs, q0, g, qkv_rows(qkv, nh, 0, g));
  float m[kRows], l[kRows] = {}, o[kRows][Cols] = {};
#pragma unroll
  for (int a = 0; a < kRows; ++a) m[a] = -INFINITY;
  for (int64_t k0 = 0; k0 < causal_keys(q0, g); k0 += kTile) {
    __syncthreads();  // the last tile's keys, values and probabilities are used
    load_keys_values(ks, vs, qkv, nh, k0, g);
    __syncthreads();
    float s[kRows][4];
    tile_dots(qs, ks, g, s);
#pragma unroll
    for (int a = 0; a < kRows; ++a) {
      const int64_t i = q0 + ty() * kRows + a;
      float tile_max = -INFINITY;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int64_t j = k0 + tx() + 16 * b;
        s[a][b] = j <= i && i < g.t ? s[a][b] * scale : -INFINITY;
        tile_max = fmaxf(tile_max, s[a][b]);
      }
      const float new_max = fmaxf(m[a], half_warp_max(tile_max));
      const float shift = new_max == -INFINITY ? 0.0f : new_max;  // a row past t has no keys
      const float rescale = expf(m[a] - shift);
      float sum = 0.0f;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int64_t j = k0 + tx() + 16 * b;
        const float p = expf(s[a][b] - shift);
        sum += p;
        ps[(ty() * kRows + a) * kScoreLd + tx() + 16 * b] = p * keep_scale(seed, rate, nh * g.t + i, g.t, j);
      }
      l[a] = l[a] * rescale + half_warp_sum(sum);
      m[a] = new_max;
#pragma unroll
      for (int b = 0; b < Cols; ++b) o[a][b] *= rescale;
    }
    __syncthreads();
    tile_product(ps, vs, g, o);
  }
  const HeadRows<float> outs = out_rows(out, nh, g);
  store_rows(o, q0, g, [&](int a, int64_t i, int col, float v) { outs(i, col) = v / l[a]; });
#pragma unroll
  for (int a = 0; a < kRows; ++a)
    if (const int64_t i = q0 + ty() * kRows + a; i < g.t && tx() == 0) lse[nh * g.t + i] = m[a] + logf(l[a]);
}

// big_d (n heads t) = dout_i . out_i per row and head, a warp a row.
__global__ void row_dot_kernel(const float* out, const float* dout, int64_t rows, HeadGeometry g, float* big_d) {
  const int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (row >= rows) return;
  const int64_t nh = row / g.t, i = row % g.t;
  float s = 0.0f;
  const HeadRows<const float> outs = out_rows(out, nh, g), douts = out_rows(dout, nh, g);
  for (int e = static_cast<int>(threadIdx.x % 32); e < g.d; e += 32) s += douts(i, e) * outs(i, e);
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  if (threadIdx.x % 32 == 0) big_d[row] = s;
}

// dK and dV for one key tile: rows of this block are keys, columns queries.
template <int Cols>
__global__ void __launch_bounds__(kThreads) attention_dkv_kernel(const float* qkv, const float* dout, const float* lse,
                                                                 const float* big_d, HeadGeometry g, float scale,
                                                                 float rate, uint64_t seed, float* dqkv) {
  extern __shared__ float smem[];
  float *ks = smem, *vs = ks + kTile * g.ld, *qs = vs + kTile * g.ld, *gs = qs + kTile * g.ld;
  float *pk = gs + kTile * g.ld, *dss = pk + kTile * kScoreLd, *ls = dss + kTile * kScoreLd, *bd = ls + kTile;
  const int64_t nh = blockIdx.y, k0 = static_cast<int64_t>(blockIdx.x) * kTile;
  load_keys_values(ks, vs, qkv, nh, k0, g);
  float dk[kRows][Cols] = {}, dv[kRows][Cols] = {};
  for (int64_t q0 = k0; q0 < g.t; q0 += kTile) {
    __syncthreads();
    load_queries_grads(qs, gs, qkv, dout, nh, q0, g);
    for (int r = static_cast<int>(threadIdx.x); r < kTile; r += kThreads) {
      const int64_t i = q0 + r;
      ls[r] = i < g.t ? lse[nh * g.t + i] : 0.0f;
      bd[r] = i < g.t ? big_d[nh * g.t + i] : 0.0f;
    }
    __syncthreads();
    float s[kRows][4], dp[kRows][4];
    tile_dots(ks, qs, g, s);
    tile_dots(vs, gs, g, dp);
#pragma unroll
    for (int a = 0; a < kRows; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int64_t j = k0 + ty() * kRows + a, i = q0 + tx() + 16 * b;
        const int il = tx() + 16 * b;
        const bool live = j <= i && i < g.t && j < g.t;
        const float p = live ? expf(s[a][b] * scale - ls[il]) : 0.0f;
        const float keep = keep_scale(seed, rate, nh * g.t + i, g.t, j);
        pk[(ty() * kRows + a) * kScoreLd + il] = p * keep;
        dss[(ty() * kRows + a) * kScoreLd + il] = p * (dp[a][b] * keep - bd[il]) * scale;
      }
    __syncthreads();
    tile_product(pk, gs, g, dv);
    tile_product(dss, qs, g, dk);
  }
  const HeadRows<float> dks = qkv_rows(dqkv, nh, 1, g), dvs = qkv_rows(dqkv, nh, 2, g);
  store_rows(dk, k0, g, [&](int, int64_t j, int col, float v) { dks(j, col) = v; });
  store_rows(dv, k0, g, [&](int, int64_t j, int col, float v) { dvs(j, col) = v; });
}

// dQ for one query tile: rows are queries, columns keys.
template <int Cols>
__global__ void __launch_bounds__(kThreads) attention_dq_kernel(const float* qkv, const float* dout, const float* lse,
                                                                const float* big_d, HeadGeometry g, float scale,
                                                                float rate, uint64_t seed, float* dqkv) {
  extern __shared__ float smem[];
  float *qs = smem, *gs = qs + kTile * g.ld, *ks = gs + kTile * g.ld, *vs = ks + kTile * g.ld;
  float* dss = vs + kTile * g.ld;
  const int64_t nh = blockIdx.y, q0 = query_tile_first();
  load_queries_grads(qs, gs, qkv, dout, nh, q0, g);
  float row_lse[kRows], row_d[kRows], dq[kRows][Cols] = {};
#pragma unroll
  for (int a = 0; a < kRows; ++a) {
    const int64_t i = q0 + ty() * kRows + a;
    row_lse[a] = i < g.t ? lse[nh * g.t + i] : 0.0f;
    row_d[a] = i < g.t ? big_d[nh * g.t + i] : 0.0f;
  }
  for (int64_t k0 = 0; k0 < causal_keys(q0, g); k0 += kTile) {
    __syncthreads();
    load_keys_values(ks, vs, qkv, nh, k0, g);
    __syncthreads();
    float s[kRows][4], dp[kRows][4];
    tile_dots(qs, ks, g, s);
    tile_dots(gs, vs, g, dp);
#pragma unroll
    for (int a = 0; a < kRows; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int64_t i = q0 + ty() * kRows + a, j = k0 + tx() + 16 * b;
        const bool live = j <= i && i < g.t;
        const float p = live ? expf(s[a][b] * scale - row_lse[a]) : 0.0f;
        const float keep = keep_scale(seed, rate, nh * g.t + i, g.t, j);
        dss[(ty() * kRows + a) * kScoreLd + tx() + 16 * b] = p * (dp[a][b] * keep - row_d[a]) * scale;
      }
    __syncthreads();
    tile_product(dss, ks, g, dq);
  }
  const HeadRows<float> dqs = qkv_rows(dqkv, nh, 0, g);
  store_rows(dq, q0, g, [&](int, int64_t i, int col, float v) { dqs(i, col) = v; });
}

// Shared bytes of `tiles` (64, d) tiles, `score_tiles` (64, 64) ones and `rows` rows of floats.
size_t shared_bytes(const HeadGeometry& g, int tiles, int score_tiles, int rows) {
  return sizeof(float) * static_cast<size_t>(tiles * kTile * g.ld + score_tiles * kTile * kScoreLd + rows * kTile);
}

template <int Cols>
void forward(const float* qkv, int64_t n, const HeadGeometry& g, float rate, uint64_t seed, float* out, float* lse,
             cudaStream_t s) {
  const size_t bytes = shared_bytes(g, 3, 1, 0);
  allow_shared(attention_forward_kernel<Cols>, bytes);
  const float scale = score_scale(g);
  attention_forward_kernel<Cols><<<tile_grid(n, g), kThreads, bytes, s>>>(qkv, g, scale, rate, seed, out, lse);
  DT_CUDA_LAUNCHED();
}

template <int Cols>
void backward(const float* qkv, const float* dout, const float* lse, const float* big_d, int64_t n,
              const HeadGeometry& g, float rate, uint64_t seed, float* dqkv, cudaStream_t s) {
  const float scale = score_scale(g);
  const size_t dkv_bytes = shared_bytes(g, 4, 2, 2), dq_bytes = shared_bytes(g, 4, 1, 0);
  allow_shared(attention_dkv_kernel<Cols>, dkv_bytes);
  allow_shared(attention_dq_kernel<Cols>, dq_bytes);
  attention_dkv_kernel<Cols>
      <<<tile_grid(n, g), kThreads, dkv_bytes, s>>>(qkv, dout, lse, big_d, g, scale, rate, seed, dqkv);
  DT_CUDA_LAUNCHED();
  attention_dq_kernel<Cols><<<tile_grid(n, g), kThreads, dq_bytes, s>>>(qkv, dout, lse, big_d, g, scale, rate, seed,
                                                                          dqkv);
  DT_CUDA_LAUNCHED();
}

}  // namespace

namespace {
size_t aligned16(size_t bytes) { return (bytes + 15) / 16 * 16; }
size_t packed_bytes(int64_t elements) { return aligned16(sizeof(uint16_t) * static_cast<size_t>(elements)); }
}  // namespace

size_t attention_scratch(int64_t n, int64_t t, int64_t c, bool pack_qkv) {
  return pack_qkv ? packed_bytes(n * t * 3 * c) : 0;
}

namespace {
// The bf16 qkv the tensor-core kernels read: as given, or packed into `scratch` (exact:
// the layer rounded it).
const uint16_t* packed_qkv(AttentionInput in, int64_t elements, void* scratch, cudaStream_t s) {
  if (in.qkv16) return in.qkv16;
  auto* qkv16 = static_cast<uint16_t*>(scratch);
  round_bf16(in.qkv, nullptr, qkv16, elements, s);
  return qkv16;
}
}  // namespace

// Heads of up to 64 features hold 4 columns a thread, wider ones 8; bf16 operands take the
// tensor-core kernels.
void attention(AttentionInput in, int64_t n, int64_t heads, int64_t t, int64_t c, bool bf16, float rate,
               uint64_t seed, float* out, float* lse, void* scratch, cudaStream_t s) {
  if (n * heads * t == 0) return;
  const HeadGeometry g = head_geometry(t, c, heads);
  if (bf16) {
    attention_bf16(packed_qkv(in, n * t * 3 * c, scratch, s), n, g, rate, seed, out, lse, s);
  } else if (g.d <= 64) {
    forward<4>(in.qkv, n, g, rate, seed, out, lse, s);
  } else {
    forward<kMaxHeadDim / 16>(in.qkv, n, g, rate, seed, out, lse, s);
  }
}

// The row dots (float32), then under bf16 dout and, unless given packed, qkv packed to bf16.
size_t attention_backward_scratch(int64_t n, int64_t heads, int64_t t, int64_t c, bool bf16, bool pack_qkv) {
  const size_t dots = aligned16(sizeof(float) * static_cast<size_t>(n * heads * t));
  return dots + (bf16 ? packed_bytes(n * t * c) : 0) + (pack_qkv ? packed_bytes(n * t * 3 * c) : 0);
}

void attention_backward(AttentionInput in, const float* out, const float* lse, const float* dout, int64_t n,
                        int64_t heads, int64_t t, int64_t c, bool bf16, float rate, uint64_t seed, float* dqkv,
                        void* scratch, cudaStream_t s) {
  const int64_t rows = n * heads * t;
  if (rows == 0) return;
  const HeadGeometry g = head_geometry(t, c, heads);
  auto* big_d = static_cast<float*>(scratch);
  row_dot_kernel<<<blocks_for(rows * 32), 256, 0, s>>>(out, dout, rows, g, big_d);
  DT_CUDA_LAUNCHED();
  if (bf16) {
    auto* dout16 = reinterpret_cast<uint16_t*>(static_cast<char*>(scratch) + aligned16(sizeof(float) * rows));
    round_bf16(dout, nullptr, dout16, n * t * c, s);
    const uint16_t* qkv16 = packed_qkv(in, n * t * 3 * c, dout16 + packed_bytes(n * t * c) / sizeof(uint16_t), s);
    attention_backward_bf16(qkv16, dout16, lse, big_d, n, g, rate, seed, dqkv, s);
  } else if (g.d <= 64) {
    backward<4>(in.qkv, dout, lse, big_d, n, g, rate, seed, dqkv, s);
  } else {
    backward<kMaxHeadDim / 16>(in.qkv, dout, lse, big_d, n, g, rate, seed, dqkv, s);
  }
}

}  // namespace distrain::cuda
