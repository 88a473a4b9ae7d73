// What the float32 and bf16 attention kernels share: tiles of 64 queries or keys, where a
// head's rows lie in qkv and out, the dropout draw, and the order of the query tiles.
#pragma once
#include <cstdint>

#include "core/backend/cuda/cuda_check.hpp"
#include "core/base/rng.hpp"

namespace distrain::cuda {

constexpr int kTile = 64;

struct HeadGeometry {
  int64_t t, c, heads;
  int d;
  int ld;  // the float32 kernels' shared-memory row stride of a (64, d) tile: d + 1
  __device__ int64_t example(int64_t nh) const { return nh / heads; }
  // qkv element of (token i, part 0/1/2 = q/k/v, column e) of head nh; out's (i, e).
  __device__ int64_t qkv_at(int64_t nh, int64_t i, int part, int e) const {
    return (example(nh) * t + i) * 3 * c + part * c + (nh % heads) * d + e;
  }
  __device__ int64_t out_at(int64_t nh, int64_t i, int e) const { return (example(nh) * t + i) * c + (nh % heads) * d + e; }
};

inline HeadGeometry head_geometry(int64_t t, int64_t c, int64_t heads) {
  const int d = static_cast<int>(c / heads);
  return HeadGeometry{t, c, heads, d, d + 1};
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
// choose under bf16 operands; big_d holds dout . out per row and head.
void attention_bf16(const float* qkv, int64_t n, const HeadGeometry& g, float rate, uint64_t seed, float* out,
                    float* lse, cudaStream_t s);
void attention_backward_bf16(const float* qkv, const float* dout, const float* lse, const float* big_d, int64_t n,
                             const HeadGeometry& g, float rate, uint64_t seed, float* dqkv, cudaStream_t s);

}  // namespace distrain::cuda
