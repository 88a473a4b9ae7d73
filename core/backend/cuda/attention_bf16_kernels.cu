// Causal attention with bf16 operands on tensor cores (train.precision = "bf16"): the
// float32 kernels' tiling (attention_kernels.cu: 64 queries or keys a block, the causal
// half skipped, the log-sum-exp kept, no (T, T) scores), with every product an mma.sync of
// bf16 operands summed in float32. Queries, keys, values and output gradients are rounded
// to bf16 as they are loaded, probabilities and score gradients as they become an operand;
// the softmax and the results stay float32. The CPU twin rounds at the same places.
//
// 4 warps a block, each owning 16 rows of the block's tile, in m16n8k16 fragments (the PTX
// ISA's layout: lane = 4 group + quad; a thread holds rows group and group + 8 of a
// fragment, columns 2 quad and 2 quad + 1, and those + 8 in the second half of k). A
// result's accumulators are, as they stand, the A operand of the next product. Tiles sit in
// shared memory as bf16 rows of D + 8 (D: the head dimension rounded up to 32, 64 or 128,
// zeros past it), so that the 8 rows of 16 bytes an ldmatrix reads at once hit distinct
// banks. The operands arrive packed to bf16 (qkv and the output gradient, by
// attention_kernels.cu); the tiles a block walks through are double-buffered, the next one
// copied by cp.async while the current one is multiplied.
#include <cuda_bf16.h>

#include <initializer_list>
#include <type_traits>

#include "core/backend/cuda/attention_geometry.cuh"
#include "core/backend/cuda/kernels.hpp"

namespace distrain::cuda {

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps, kPad = 8;
constexpr int kKeyFrags = kTile / 8;  // a (16, 64) score tile: 8 fragments of 8 columns

__device__ int warp() { return static_cast<int>(threadIdx.x) / 32; }
__device__ int group() { return static_cast<int>(threadIdx.x) % 32 / 4; }
__device__ int quad() { return static_cast<int>(threadIdx.x) % 4; }

__device__ uint32_t pack(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// c (16 x 8) += a (16 x 16) b (16 x 8).
__device__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8 x 8 blocks of bf16 from shared memory, lane l naming row l % 8 of block l / 8; each
// lane receives, of block b, elements (group, 2 quad) and (group, 2 quad + 1) in x[b], or
// transposed, (2 quad, group) and (2 quad + 1, group): a fragment's registers.
template <bool Transposed>
__device__ void load_blocks(uint32_t (&x)[4], const __nv_bfloat16* row) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                 : "r"(address));
}

// A (64, D) tile of bf16 in shared memory.
template <int D>
struct Tile {
  static constexpr int ld = D + kPad;
  __nv_bfloat16* p;
  // The row this lane names to load_blocks for four 8 x 8 blocks from (r, c): one bit of
  // block b moves it 8 rows down, the other 8 columns right (down_first: bit 0 moves down).
  __device__ const __nv_bfloat16* block_row(int r, int c, bool down_first) const {
    const int lane = static_cast<int>(threadIdx.x) % 32, b = lane / 8;
    const int down = down_first ? b & 1 : b >> 1, right = down_first ? b >> 1 : b & 1;
    return p + (r + 8 * down + lane % 8) * ld + c + 8 * right;
  }
};
template <int D>
constexpr size_t tile_bytes() {
  return sizeof(__nv_bfloat16) * kTile * Tile<D>::ld;
}

__device__ void copy16_async(void* shared, const void* global, int global_bytes) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global), "r"(global_bytes));
}
__device__ void commit_copies() { asm volatile("cp.async.commit_group;\n"); }
// Waits until at most `pending` of this thread's latest committed copy groups are in flight.
template <int Pending>
__device__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// Rows [first, first + 64) of a head's (t, d) bf16 rows into tile, zeros past t and d:
// 16-byte asynchronous copies where the rows allow it (g.vectors; the caller commits and
// waits), else one value at a time.
template <int D>
__device__ void load_tile(Tile<D> tile, int64_t first, const HeadGeometry& g, HeadRows<const uint16_t> rows) {
  auto* dst = reinterpret_cast<uint16_t*>(tile.p);
  if (g.vectors) {
    for (int idx = static_cast<int>(threadIdx.x); idx < kTile * D / 8; idx += kThreads) {
      const int r = idx / (D / 8), e = idx % (D / 8) * 8;
      const int64_t i = first + r;
      const bool inside = i < g.t && e < g.d;  // d is a multiple of 8 here
      copy16_async(dst + r * Tile<D>::ld + e, inside ? &rows(i, e) : rows.p, inside ? 16 : 0);
    }
    return;
  }
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * D; idx += kThreads) {
    const int r = idx / D, e = idx % D;
    const int64_t i = first + r;
    dst[r * Tile<D>::ld + e] = i < g.t && e < g.d ? rows(i, e) : uint16_t{0};
  }
}

// Per-row float32 values of a tile (rows past t: 0).
__device__ void load_row_values(float* dst, int64_t first, int64_t t, const float* values) {
  for (int r = static_cast<int>(threadIdx.x); r < kTile; r += kThreads) dst[r] = first + r < t ? values[first + r] : 0.0f;
}

// s (16, 64) = rows [r0, r0 + 16) of x times all 64 rows of y, transposed, over D.
// The A fragment (rows, then columns, in 8 x 8 blocks: down first) and two B fragments of
// rows 8 f and 8 f + 8 (right first: each fragment's two halves of k) per load_blocks.
template <int D>
__device__ void row_dots(Tile<D> x, int r0, Tile<D> y, float (&s)[kKeyFrags][4]) {
#pragma unroll
  for (int f = 0; f < kKeyFrags; ++f) s[f][0] = s[f][1] = s[f][2] = s[f][3] = 0.0f;
#pragma unroll
  for (int k = 0; k < D; k += 16) {
    uint32_t a[4];
    load_blocks<false>(a, x.block_row(r0, k, true));
#pragma unroll
    for (int f = 0; f < kKeyFrags; f += 2) {
      uint32_t b[4];
      load_blocks<false>(b, y.block_row(8 * f, k, false));
      mma(s[f], a, b[0], b[1]);
      mma(s[f + 1], a, b[2], b[3]);
    }
  }
}

// acc (16, D) += w (16, 64; accumulators, rounded to bf16 here) times all of m (64, D).
template <int D>
__device__ void accumulate(const float (&w)[kKeyFrags][4], Tile<D> m, float (&acc)[D / 8][4]) {
#pragma unroll
  for (int k = 0; k < kTile / 16; ++k) {
    const uint32_t a[4] = {pack(w[2 * k][0], w[2 * k][1]), pack(w[2 * k][2], w[2 * k][3]),
                           pack(w[2 * k + 1][0], w[2 * k + 1][1]), pack(w[2 * k + 1][2], w[2 * k + 1][3])};
#pragma unroll
    for (int f = 0; f < D / 8; f += 2) {  // m's rows 16 k .. 16 k + 15 are k, its columns n: transposed
      uint32_t b[4];
      load_blocks<true>(b, m.block_row(16 * k, 8 * f, true));
      mma(acc[f], a, b[0], b[1]);
      mma(acc[f + 1], a, b[2], b[3]);
    }
  }
}

// For each of a thread's elements of a (16, 64) tile whose rows start at row0 and columns at
// col0: fn(f, h, c, row, col) for accumulator [f][2 h + c].
template <typename Fn>
__device__ void each_element(int64_t row0, int64_t col0, Fn fn) {
#pragma unroll
  for (int f = 0; f < kKeyFrags; ++f)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) fn(f, h, c, row0 + group() + 8 * h, col0 + 8 * f + 2 * quad() + c);
}

// A thread's rows of a (16, D) result from row0, rows past t and columns past d left out.
template <int D, typename Put>
__device__ void store_rows(const float (&acc)[D / 8][4], int64_t row0, const HeadGeometry& g, Put put) {
#pragma unroll
  for (int f = 0; f < D / 8; ++f)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t i = row0 + group() + 8 * h;
        if (const int e = 8 * f + 2 * quad() + c; i < g.t && e < g.d) put(h, i, e, acc[f][2 * h + c]);
      }
}

__device__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

template <int D>
__global__ void __launch_bounds__(kThreads) forward_kernel(const uint16_t* qkv, HeadGeometry g, float scale, float rate,
                                                           uint64_t seed, float* out, float* lse) {
  extern __shared__ __align__(16) unsigned char smem[];
  // Queries, then keys and values in two stages: (k, v) of stage b at kv[2 b], kv[2 b + 1].
  const Tile<D> qs{reinterpret_cast<__nv_bfloat16*>(smem)};
  auto kv = [&](int i) { return Tile<D>{qs.p + (1 + i) * kTile * Tile<D>::ld}; };
  const int64_t nh = blockIdx.y, q0 = query_tile_first(), row0 = q0 + 16 * warp();
  const HeadRows<const uint16_t> keys = qkv_rows(qkv, nh, 1, g), values = qkv_rows(qkv, nh, 2, g);
  load_tile(qs, q0, g, qkv_rows(qkv, nh, 0, g));
  load_tile(kv(0), 0, g, keys);
  load_tile(kv(1), 0, g, values);
  commit_copies();
  float o[D / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {};
  const int64_t end = causal_keys(q0, g);
  for (int64_t k0 = 0, stage = 0; k0 < end; k0 += kTile, stage ^= 1) {
    if (k0 + kTile < end) {  // the next tile, into the stage the last one used
      load_tile(kv(2 * (stage ^ 1)), k0 + kTile, g, keys);
      load_tile(kv(2 * (stage ^ 1) + 1), k0 + kTile, g, values);
    }
    commit_copies();
    wait_copies<1>();
    __syncthreads();
    const Tile<D> ks = kv(2 * static_cast<int>(stage)), vs = kv(2 * static_cast<int>(stage) + 1);
    float s[kKeyFrags][4];
    row_dots(qs, 16 * warp(), ks, s);
    float tile_max[2] = {-INFINITY, -INFINITY};
    each_element(row0, k0, [&](int f, int h, int c, int64_t i, int64_t j) {
      float& v = s[f][2 * h + c];
      v = j <= i && i < g.t ? v * scale : -INFINITY;
      tile_max[h] = fmaxf(tile_max[h], v);
    });
    float shift[2], rescale[2], sum[2] = {};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float new_max = fmaxf(m[h], quad_max(tile_max[h]));
      shift[h] = new_max == -INFINITY ? 0.0f : new_max;  // a row past t has no keys
      rescale[h] = expf(m[h] - shift[h]);
      m[h] = new_max;
    }
    each_element(row0, k0, [&](int f, int h, int c, int64_t i, int64_t j) {
      const float p = expf(s[f][2 * h + c] - shift[h]);
      sum[h] += p;
      s[f][2 * h + c] = p * keep_scale(seed, rate, nh * g.t + i, g.t, j);
    });
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] = l[h] * rescale[h] + quad_sum(sum[h]);
#pragma unroll
      for (int f = 0; f < D / 8; ++f) o[f][2 * h] *= rescale[h], o[f][2 * h + 1] *= rescale[h];
    }
    accumulate(s, vs, o);
    __syncthreads();  // all warps are done with this stage before the next iteration refills it
  }
  const HeadRows<float> outs = out_rows(out, nh, g);
  store_rows<D>(o, row0, g, [&](int h, int64_t i, int e, float v) { outs(i, e) = v / l[h]; });
#pragma unroll
  for (int h = 0; h < 2; ++h)
    if (const int64_t i = row0 + group() + 8 * h; i < g.t && quad() == 0) lse[nh * g.t + i] = m[h] + logf(l[h]);
}

// dK and dV for one key tile: a warp's rows are keys, its columns queries.
template <int D>
__global__ void __launch_bounds__(kThreads) dkv_kernel(const uint16_t* qkv, const uint16_t* dout, const float* lse,
                                                       const float* big_d, HeadGeometry g, float scale, float rate,
                                                       uint64_t seed, float* dqkv) {
  extern __shared__ __align__(16) unsigned char smem[];
  // Keys, values, then queries and output gradients in two stages (qg(2 b), qg(2 b + 1)),
  // then each stage's log-sum-exps and row dots (rows(2 b), rows(2 b + 1)).
  const Tile<D> ks{reinterpret_cast<__nv_bfloat16*>(smem)}, vs{ks.p + kTile * Tile<D>::ld};
  auto qg = [&](int i) { return Tile<D>{vs.p + (1 + i) * kTile * Tile<D>::ld}; };
  auto row_values = [&](int i) { return reinterpret_cast<float*>(qg(4).p) + i * kTile; };
  const int64_t nh = blockIdx.y, k0 = static_cast<int64_t>(blockIdx.x) * kTile, row0 = k0 + 16 * warp();
  const HeadRows<const uint16_t> queries = qkv_rows(qkv, nh, 0, g), grads = out_rows(dout, nh, g);
  auto load_stage = [&](int b, int64_t q0) {
    load_tile(qg(2 * b), q0, g, queries);
    load_tile(qg(2 * b + 1), q0, g, grads);
    load_row_values(row_values(2 * b), q0, g.t, lse + nh * g.t);
    load_row_values(row_values(2 * b + 1), q0, g.t, big_d + nh * g.t);
  };
  load_tile(ks, k0, g, qkv_rows(qkv, nh, 1, g));
  load_tile(vs, k0, g, qkv_rows(qkv, nh, 2, g));
  load_stage(0, k0);
  commit_copies();
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  for (int64_t q0 = k0, stage = 0; q0 < g.t; q0 += kTile, stage ^= 1) {
    if (q0 + kTile < g.t) load_stage(static_cast<int>(stage ^ 1), q0 + kTile);
    commit_copies();
    wait_copies<1>();
    __syncthreads();
    const int b = static_cast<int>(stage);
    const Tile<D> qs = qg(2 * b), gs = qg(2 * b + 1);
    const float *ls = row_values(2 * b), *bd = row_values(2 * b + 1);
    float s[kKeyFrags][4], dp[kKeyFrags][4];
    row_dots(ks, 16 * warp(), qs, s);
    row_dots(vs, 16 * warp(), gs, dp);
    each_element(row0, q0, [&](int f, int h, int c, int64_t j, int64_t i) {
      const int il = static_cast<int>(i - q0);
      const float p = j <= i && i < g.t ? expf(s[f][2 * h + c] * scale - ls[il]) : 0.0f;
      const float keep = keep_scale(seed, rate, nh * g.t + i, g.t, j);
      s[f][2 * h + c] = p * keep;
      dp[f][2 * h + c] = p * (dp[f][2 * h + c] * keep - bd[il]) * scale;
    });
    accumulate(s, gs, dv);
    accumulate(dp, qs, dk);
    __syncthreads();  // all warps are done with this stage before the next iteration refills it
  }
  const HeadRows<float> dks = qkv_rows(dqkv, nh, 1, g), dvs = qkv_rows(dqkv, nh, 2, g);
  store_rows<D>(dk, row0, g, [&](int, int64_t j, int e, float v) { dks(j, e) = v; });
  store_rows<D>(dv, row0, g, [&](int, int64_t j, int e, float v) { dvs(j, e) = v; });
}

// dQ for one query tile: a warp's rows are queries, its columns keys.
template <int D>
__global__ void __launch_bounds__(kThreads) dq_kernel(const uint16_t* qkv, const uint16_t* dout, const float* lse,
                                                      const float* big_d, HeadGeometry g, float scale, float rate,
                                                      uint64_t seed, float* dqkv) {
  extern __shared__ __align__(16) unsigned char smem[];
  // Queries, output gradients, then keys and values in two stages as in forward_kernel.
  const Tile<D> qs{reinterpret_cast<__nv_bfloat16*>(smem)}, gs{qs.p + kTile * Tile<D>::ld};
  auto kv = [&](int i) { return Tile<D>{gs.p + (1 + i) * kTile * Tile<D>::ld}; };
  const int64_t nh = blockIdx.y, q0 = query_tile_first(), row0 = q0 + 16 * warp();
  const HeadRows<const uint16_t> keys = qkv_rows(qkv, nh, 1, g), values = qkv_rows(qkv, nh, 2, g);
  load_tile(qs, q0, g, qkv_rows(qkv, nh, 0, g));
  load_tile(gs, q0, g, out_rows(dout, nh, g));
  load_tile(kv(0), 0, g, keys);
  load_tile(kv(1), 0, g, values);
  commit_copies();
  float row_lse[2], row_d[2], dq[D / 8][4] = {};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t i = row0 + group() + 8 * h;
    row_lse[h] = i < g.t ? lse[nh * g.t + i] : 0.0f;
    row_d[h] = i < g.t ? big_d[nh * g.t + i] : 0.0f;
  }
  const int64_t end = causal_keys(q0, g);
  for (int64_t k0 = 0, stage = 0; k0 < end; k0 += kTile, stage ^= 1) {
    if (k0 + kTile < end) {
      load_tile(kv(2 * (stage ^ 1)), k0 + kTile, g, keys);
      load_tile(kv(2 * (stage ^ 1) + 1), k0 + kTile, g, values);
    }
    commit_copies();
    wait_copies<1>();
    __syncthreads();
    const Tile<D> ks = kv(2 * static_cast<int>(stage)), vs = kv(2 * static_cast<int>(stage) + 1);
    float s[kKeyFrags][4], dp[kKeyFrags][4];
    row_dots(qs, 16 * warp(), ks, s);
    row_dots(gs, 16 * warp(), vs, dp);
    each_element(row0, k0, [&](int f, int h, int c, int64_t i, int64_t j) {
      const float p = j <= i && i < g.t ? expf(s[f][2 * h + c] * scale - row_lse[h]) : 0.0f;
      const float keep = keep_scale(seed, rate, nh * g.t + i, g.t, j);
      dp[f][2 * h + c] = p * (dp[f][2 * h + c] * keep - row_d[h]) * scale;
    });
    accumulate(dp, ks, dq);
    __syncthreads();  // all warps are done with this stage before the next iteration refills it
  }
  const HeadRows<float> dqs = qkv_rows(dqkv, nh, 0, g);
  store_rows<D>(dq, row0, g, [&](int, int64_t i, int e, float v) { dqs(i, e) = v; });
}

template <int D>
void forward(const uint16_t* qkv, int64_t n, const HeadGeometry& g, float rate, uint64_t seed, float* out, float* lse,
             cudaStream_t s) {
  const size_t bytes = 5 * tile_bytes<D>();
  allow_shared(forward_kernel<D>, bytes);
  const float scale = score_scale(g);
  forward_kernel<D><<<tile_grid(n, g), kThreads, bytes, s>>>(qkv, g, scale, rate, seed, out, lse);
  DT_CUDA_LAUNCHED();
}

template <int D>
void backward(const uint16_t* qkv, const uint16_t* dout, const float* lse, const float* big_d, int64_t n,
              const HeadGeometry& g, float rate, uint64_t seed, float* dqkv, cudaStream_t s) {
  const float scale = score_scale(g);
  const size_t dkv_bytes = 6 * tile_bytes<D>() + 4 * kTile * sizeof(float), dq_bytes = 6 * tile_bytes<D>();
  allow_shared(dkv_kernel<D>, dkv_bytes);
  allow_shared(dq_kernel<D>, dq_bytes);
  dkv_kernel<D><<<tile_grid(n, g), kThreads, dkv_bytes, s>>>(qkv, dout, lse, big_d, g, scale, rate, seed, dqkv);
  DT_CUDA_LAUNCHED();
  dq_kernel<D><<<tile_grid(n, g), kThreads, dq_bytes, s>>>(qkv, dout, lse, big_d, g, scale, rate, seed, dqkv);
  DT_CUDA_LAUNCHED();
}

// Whether every head's bf16 rows start at a 16-byte boundary, for cp.async.
bool bf16_vector_reads(const HeadGeometry& g, std::initializer_list<const uint16_t*> tensors) {
  bool aligned = g.c % 8 == 0 && g.d % 8 == 0;
  for (const uint16_t* p : tensors) aligned = aligned && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  return aligned;
}

// run(width) with heads of d features padded with zeros to 32, 64 or 128 (width(): that
// width, a compile-time constant).
template <typename Run>
void at_padded_width(int d, Run run) {
  if (d <= 32)
    run(std::integral_constant<int, 32>{});
  else if (d <= 64)
    run(std::integral_constant<int, 64>{});
  else
    run(std::integral_constant<int, 128>{});
}

}  // namespace

void attention_bf16(const uint16_t* qkv, int64_t n, const HeadGeometry& geometry, float rate, uint64_t seed, float* out,
                    float* lse, cudaStream_t s) {
  HeadGeometry g = geometry;
  g.vectors = bf16_vector_reads(g, {qkv});
  at_padded_width(g.d, [&](auto width) { forward<width()>(qkv, n, g, rate, seed, out, lse, s); });
}

void attention_backward_bf16(const uint16_t* qkv, const uint16_t* dout, const float* lse, const float* big_d, int64_t n,
                             const HeadGeometry& geometry, float rate, uint64_t seed, float* dqkv, cudaStream_t s) {
  HeadGeometry g = geometry;
  g.vectors = bf16_vector_reads(g, {qkv, dout});
  at_padded_width(g.d, [&](auto width) { backward<width()>(qkv, dout, lse, big_d, n, g, rate, seed, dqkv, s); });
}

}  // namespace distrain::cuda
