// bfloat16 conversions on the GPU, bit for bit the CPU's (core/backend/cpu/cpu_bf16.hpp):
// rounding to nearest even, NaN kept NaN (bf16_bits.cuh).
#include <algorithm>

#include "core/backend/cuda/bf16_bits.cuh"
#include "core/backend/cuda/column_sums.cuh"
#include "core/backend/cuda/kernels.hpp"

namespace distrain::cuda {

namespace {

// One element a thread: the tails of the 8-wide kernels, and buffers not 16-byte aligned.
__global__ void round_kernel(const float* x, float* y, uint16_t* packed, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint16_t bits = to_bf16_bits(x[i]);
  if (packed) packed[i] = bits;
  if (y) y[i] = from_bf16_bits(bits);
}

__global__ void unpack_kernel(const uint16_t* packed, float* y, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = from_bf16_bits(packed[i]);
}

__global__ void round8_kernel(const float* x, float* y, uint16_t* packed, int64_t groups) {
  for (int64_t g = first_group(); g < groups; g += group_stride()) {
    const uint4 bits = to_bf16x8(load8(x + 8 * g));
    if (packed) reinterpret_cast<uint4*>(packed)[g] = bits;
    if (y) store8(from_bf16x8(bits), y + 8 * g);
  }
}

__global__ void unpack8_kernel(const uint16_t* packed, float* y, int64_t groups) {
  for (int64_t g = first_group(); g < groups; g += group_stride())
    store8(from_bf16x8(reinterpret_cast<const uint4*>(packed)[g]), y + 8 * g);
}

// Row r < padded_rows of packed (ld apart, ld a multiple of 8): x's row r rounded, zeros
// past its cols and in rows past x's. Eight columns a thread, stored 16 bytes at a time;
// read 16 bytes at a time where x's rows are aligned (Aligned), else one float at a time.
// x float32 (rounded here) or bf16 (copied).
__device__ uint4 packed8(const float* row, bool aligned, int64_t valid) {
  Floats8 f{};
  if (aligned && valid >= 8) {
    f = load8(row);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) f.v[j] = j < valid ? row[j] : 0.0f;
  }
  return to_bf16x8(f);
}
__device__ uint4 packed8(const uint16_t* row, bool aligned, int64_t valid) {
  if (aligned && valid >= 8) return *reinterpret_cast<const uint4*>(row);
  uint32_t w[4] = {};
#pragma unroll
  for (int j = 0; j < 8; ++j)
    if (j < valid) w[j / 2] |= static_cast<uint32_t>(row[j]) << (16 * (j % 2));
  return make_uint4(w[0], w[1], w[2], w[3]);
}
template <bool Aligned, typename Src>
__global__ void pack_rows_kernel(const Src* x, int64_t rows, int64_t cols, int64_t ld, int64_t padded_rows,
                                 uint16_t* packed) {
  const int64_t c0 = 8 * (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (c0 >= ld) return;
  for (int64_t r = blockIdx.y; r < padded_rows; r += gridDim.y)
    reinterpret_cast<uint4*>(packed + r * ld)[c0 / 8] =
        r < rows ? packed8(x + r * cols + c0, Aligned, cols - c0) : make_uint4(0, 0, 0, 0);
}

// c (rows, cols) = padded (rows, ld apart) + beta c; c not read where beta is 0, as BLAS.
__global__ void unpad_rows_kernel(const float* padded, int64_t rows, int64_t cols, int64_t ld, float beta, float* c) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float v = padded[r * ld + j];
    c[r * cols + j] = beta == 0.0f ? v : v + beta * c[r * cols + j];
  }
}

dim3 row_grid(int64_t columns_of_threads, int64_t rows, unsigned threads) {
  return dim3(static_cast<unsigned>((columns_of_threads + threads - 1) / threads),
              static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
}

template <typename Src>
void launch_pack_rows(const Src* x, int64_t rows, int64_t cols, int64_t ld, int64_t padded_rows, uint16_t* packed,
                      cudaStream_t s) {
  const dim3 grid = row_grid(ld / 8, padded_rows, 128);
  if (cols % (16 / sizeof(Src)) == 0 && aligned16(x))
    pack_rows_kernel<true><<<grid, 128, 0, s>>>(x, rows, cols, ld, padded_rows, packed);
  else
    pack_rows_kernel<false><<<grid, 128, 0, s>>>(x, rows, cols, ld, padded_rows, packed);
  DT_CUDA_LAUNCHED();
}

}  // namespace

void pack_bf16_rows(const float* x, int64_t rows, int64_t cols, int64_t ld, int64_t padded_rows, uint16_t* packed,
                    cudaStream_t s) {
  if (padded_rows * ld == 0) return;
  if (ld == cols && padded_rows == rows) return round_bf16(x, nullptr, packed, rows * cols, s);
  launch_pack_rows(x, rows, cols, ld, padded_rows, packed, s);
}

void pack_bf16_rows(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, int64_t padded_rows, uint16_t* packed,
                    cudaStream_t s) {
  if (padded_rows * ld != 0) launch_pack_rows(x, rows, cols, ld, padded_rows, packed, s);
}

void unpad_rows(const float* padded, int64_t rows, int64_t cols, int64_t ld, float beta, float* c, cudaStream_t s) {
  if (rows * cols == 0) return;
  unpad_rows_kernel<<<row_grid(cols, rows, 256), 256, 0, s>>>(padded, rows, cols, ld, beta, c);
  DT_CUDA_LAUNCHED();
}

void round_bf16(const float* x, float* y, uint16_t* packed, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  int64_t done = 0;
  if (aligned16(x) && aligned16(y) && aligned16(packed) && n >= 8) {
    done = n / 8 * 8;
    round8_kernel<<<grid_for_groups(n / 8), 256, 0, s>>>(x, y, packed, n / 8);
    DT_CUDA_LAUNCHED();
  }
  if (done == n) return;
  round_kernel<<<blocks_for(n - done), 256, 0, s>>>(x + done, y ? y + done : nullptr, packed ? packed + done : nullptr,
                                                     n - done);
  DT_CUDA_LAUNCHED();
}

void unpack_bf16(const uint16_t* packed, float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  int64_t done = 0;
  if (aligned16(packed) && aligned16(y) && n >= 8) {
    done = n / 8 * 8;
    unpack8_kernel<<<grid_for_groups(n / 8), 256, 0, s>>>(packed, y, n / 8);
    DT_CUDA_LAUNCHED();
  }
  if (done == n) return;
  unpack_kernel<<<blocks_for(n - done), 256, 0, s>>>(packed + done, y + done, n - done);
  DT_CUDA_LAUNCHED();
}

}  // namespace distrain::cuda
