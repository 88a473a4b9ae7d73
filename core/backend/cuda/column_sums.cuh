// Deterministic per-column sums of a (rows, cols) row-major matrix on the GPU: the rows
// are cut into a fixed number of chunks, each summed by one block in a fixed order, and
// the chunk sums are added in chunk order, so results never depend on timing.
// Used for bias gradients and batch-norm statistics (NHWC: rows = N*H*W, cols = C).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/backend/cuda/cuda_check.hpp"

namespace distrain::cuda {

constexpr int kSumColsPerBlock = 32, kSumRowsPerBlock = 8;

template <typename T, typename F>
__global__ void column_partials(int64_t rows, int64_t cols, int chunks, F f, T* partial) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kSumColsPerBlock + threadIdx.x;
  const int64_t r0 = rows * blockIdx.y / chunks, r1 = rows * (blockIdx.y + 1) / chunks;
  T acc = 0;
  if (c < cols)
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kSumRowsPerBlock) acc += f(r, c);
  __shared__ T lanes[kSumRowsPerBlock][kSumColsPerBlock + 1];
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    T total = 0;
    for (int k = 0; k < kSumRowsPerBlock; ++k) total += lanes[k][threadIdx.x];
    partial[static_cast<int64_t>(blockIdx.y) * cols + c] = total;
  }
}

template <typename T, typename Out>
__global__ void column_finish(int64_t cols, int chunks, const T* partial, Out out) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  T total = 0;
  for (int k = 0; k < chunks; ++k) total += partial[static_cast<int64_t>(k) * cols + c];
  out(c, total);
}

// Chunks for `rows`: enough blocks to fill the GPU, each still summing many rows.
inline int column_sum_chunks(int64_t rows) { return static_cast<int>(std::clamp<int64_t>(rows / 256, 1, 512)); }

// Bytes of scratch column_sums needs.
template <typename T>
size_t column_sum_scratch_bytes(int64_t rows, int64_t cols) {
  return sizeof(T) * static_cast<size_t>(column_sum_chunks(rows)) * static_cast<size_t>(cols);
}

// out(c, sum over r of f(r, c)) for every column c; scratch holds column_sum_scratch_bytes<T>.
template <typename T, typename F, typename Out>
void column_sums(int64_t rows, int64_t cols, F f, Out out, void* scratch, cudaStream_t stream) {
  const int chunks = column_sum_chunks(rows);
  T* partial = static_cast<T*>(scratch);
  const dim3 grid(static_cast<unsigned>((cols + kSumColsPerBlock - 1) / kSumColsPerBlock), static_cast<unsigned>(chunks));
  column_partials<T><<<grid, dim3(kSumColsPerBlock, kSumRowsPerBlock), 0, stream>>>(rows, cols, chunks, f, partial);
  DT_CUDA_LAUNCHED();
  column_finish<T><<<static_cast<unsigned>((cols + 127) / 128), 128, 0, stream>>>(cols, chunks, partial, out);
  DT_CUDA_LAUNCHED();
}

// The plainest summand and output: a matrix's (r, c) element, added into out[c].
struct MatrixColumn {
  const float* m;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const { return m[r * cols + c]; }
};
struct AddTo {
  float* out;
  __device__ void operator()(int64_t c, float total) const { out[c] += total; }
};

// A grid of `threads` threads in blocks of 256, for one-element-per-thread kernels.
inline unsigned blocks_for(int64_t threads) { return static_cast<unsigned>((threads + 255) / 256); }

// This thread's index in such a grid, in the kernel's index type (see kMaxInt32Index).
template <typename I>
__device__ I grid_index() {
  return static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x);
}

}  // namespace distrain::cuda
