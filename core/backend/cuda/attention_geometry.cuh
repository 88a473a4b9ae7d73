// What the float32 and bf16 attention kernels share: tiles of 64 queries or keys, where a
// head's rows lie in qkv and out, the dropout draw, and the order of the query tiles.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "core/backend/cuda/cuda_check.hpp"
#include "core/base/rng.hpp"

namespace distrain::cuda {

constexpr int kTile = 64;

struct HeadGeometry {
  int64_t t, c, heads;
  int d;
  int ld;        // the float32 kernels' shared-memory row stride of a (64, d) tile: d + 1
  bool vectors;  // rows may be read 4 floats at a time: 16-byte aligned (vector_reads)
};

inline HeadGeometry head_geometry(int64_t t, int64_t c, int64_t heads) {
  const int d = static_cast<int>(c / heads);
  return HeadGeometry{t, c, heads, d, d + 1, false};
}

// Scores are q . k / sqrt(d).
inline float score_scale(const HeadGeometry& g) { return 1.0f / sqrtf(static_cast<float>(g.d)); }

// Whether every head's rows of these (n, t, k c) tensors start at a 16-byte boundary.
inline bool vector_reads(const HeadGeometry& g, std::initializer_list<const float*> tensors) {
  bool aligned = g.c % 4 == 0 && g.d % 4 == 0;
  for (const float* p : tensors) aligned = aligned && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  return aligned;
}

// One head's rows of one part of qkv (0, 1, 2: queries, keys, values) or of out: row i's
// column e at p[i * stride + e]. Found once a block, not per element (64-bit divisions).
template <typename T>
struct HeadRows {
  T* p;
  int64_t stride;
  __device__ T& operator()(int64_t i, int e) const { return p[i * stride + e]; }
};
template <typename T>
__device__ HeadRows<T> qkv_rows(T* qkv, int64_t nh, int part, const HeadGeometry& g) {
  return {qkv + (nh / g.heads * g.t * 3 + part) * g.c + nh % g.heads * g.d, 3 * g.c};
}
template <typename T>
__device__ HeadRows<T> out_rows(T* out, int64_t nh, const HeadGeometry& g) {
  return {out + nh / g.heads * g.t * g.c + nh % g.heads * g.d, g.c};
}

// The end of the keys a query tile from q0 attends to (the causal mask's last column).
__device__ inline int64_t causal_keys(int64_t q0, const HeadGeometry& g) { return g.t < q0 + kTile ? g.t : q0 + kTile; }

// The dropout mask of probability (row, j), the CPU's draw.
__device__ inline float keep_scale(uint64_t seed, float rate, int64_t row, int64_t t, int64_t j) {
  if (rate <= 0.0f) return 1.0f;
  return uniform_at(seed, static_cast<uint64_t>(row * t + j)) >= rate ? 1.0f / (1.0f - rate) : 0.0f;
}

// Query tiles in reverse, so the longest (last) tiles start first.
__device__ inline int64_t query_tile_first() { return static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kTile; }

// One block per tile of 64 rows (x) and per (example, head) (y).
inline dim3 tile_grid(int64_t n, const HeadGeometry& g) {
  return dim3(static_cast<unsigned>((g.t + kTile - 1) / kTile), static_cast<unsigned>(n * g.heads));
}

template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  DT_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// The bf16 kernels (attention_bf16_kernels.cu), which attention() and attention_backward()
// choose under bf16 operands, on qkv and dout packed to bf16; big_d holds dout . out per
// row and head.
void attention_bf16(const uint16_t* qkv, int64_t n, const HeadGeometry& g, float rate, uint64_t seed, float* out,
                    float* lse, cudaStream_t s);
void attention_backward_bf16(const uint16_t* qkv, const uint16_t* dout, const float* lse, const float* big_d, int64_t n,
                             const HeadGeometry& g, float rate, uint64_t seed, float* dqkv, cudaStream_t s);

}  // namespace distrain::cuda
