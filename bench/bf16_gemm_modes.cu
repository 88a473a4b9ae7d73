// How to run distrain's bf16 products on cuBLAS: operands packed to bf16 by a kernel first
// (what gemm_bf16 does), or float32 operands handed to cuBLAS with
// CUBLAS_COMPUTE_32F_FAST_16BF (it rounds them itself, no packing pass). For GPT-2 124M's
// products at 16 x 1024 tokens: the device time of each way (median of 20), and how far
// their results are apart on operands already bf16 values (summation order only) and on
// unrounded ones (which also shows whether cuBLAS rounds to nearest as distrain does).
// Built and run by bench/gpu_session.sh (part gemm_modes).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                       \
  do {                                                                                 \
    if (auto e = (x); e != 0) {                                                        \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, int(e)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

__device__ uint16_t bf16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__global__ void fill(float* x, int64_t n, uint32_t seed, bool rounded) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float v = (h & 0xffffff) / float(1 << 24) - 0.5f;
    x[i] = rounded ? __uint_as_float(uint32_t(bf16_bits(v)) << 16) : v;
  }
}
__global__ void pack(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = bf16_bits(x[i]);
}

struct Shape {
  const char* what;
  int m, k, n;
  bool ta, tb;
};

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  cublasHandle_t h;
  CHECK(cublasCreate(&h));
  void* ws;
  CHECK(cudaMalloc(&ws, 64 << 20));
  CHECK(cublasSetWorkspace(h, ws, 64 << 20));
  const Shape shapes[] = {
      {"qkv forward", 16384, 768, 2304, false, false},  {"fc forward", 16384, 768, 3072, false, false},
      {"proj forward", 16384, 3072, 768, false, false}, {"fc input grad", 16384, 3072, 768, false, true},
      {"fc kernel grad", 768, 16384, 3072, true, false}, {"head forward", 16384, 768, 50264, false, true},
  };
  std::printf("%-16s %6s %6s %6s  %10s %10s %10s  %12s %12s\n", "product", "m", "k", "n", "pack ms", "gemm ms",
              "fast16 ms", "rel.diff bf16", "rel.diff f32");
  for (const Shape& s : shapes) {
    const int64_t na = int64_t(s.m) * s.k, nb = int64_t(s.k) * s.n, nc = int64_t(s.m) * s.n;
    float *a, *b, *c1, *c2;
    uint16_t *a16, *b16;
    CHECK(cudaMalloc(&a, 4 * na));
    CHECK(cudaMalloc(&b, 4 * nb));
    CHECK(cudaMalloc(&c1, 4 * nc));
    CHECK(cudaMalloc(&c2, 4 * nc));
    CHECK(cudaMalloc(&a16, 2 * na));
    CHECK(cudaMalloc(&b16, 2 * nb));
    const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
    const float one = 1.0f, zero = 0.0f;
    auto packed = [&] {
      pack<<<1024, 256>>>(a, a16, na);
      pack<<<1024, 256>>>(b, b16, nb);
    };
    auto gemm16 = [&] {
      CHECK(cublasGemmEx(h, s.tb ? CUBLAS_OP_T : CUBLAS_OP_N, s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k, &one, b16,
                         CUDA_R_16BF, ldb, a16, CUDA_R_16BF, lda, &zero, c1, CUDA_R_32F, s.n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
    };
    auto fast16 = [&] {
      CHECK(cublasGemmEx(h, s.tb ? CUBLAS_OP_T : CUBLAS_OP_N, s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, s.n, s.m, s.k, &one, b,
                         CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &zero, c2, CUDA_R_32F, s.n, CUBLAS_COMPUTE_32F_FAST_16BF,
                         CUBLAS_GEMM_DEFAULT));
    };
    auto timed = [&](auto&& f) {
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      std::vector<float> ms;
      for (int i = 0; i < 23; ++i) {
        cudaEventRecord(e0);
        f();
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float t;
        cudaEventElapsedTime(&t, e0, e1);
        if (i >= 3) ms.push_back(t);
      }
      return median(ms);
    };
    auto rel_diff = [&] {
      std::vector<float> h1(nc), h2(nc);
      CHECK(cudaMemcpy(h1.data(), c1, 4 * nc, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(h2.data(), c2, 4 * nc, cudaMemcpyDeviceToHost));
      double d = 0, scale = 0;
      for (int64_t i = 0; i < nc; ++i) {
        d = std::max(d, double(std::fabs(h1[i] - h2[i])));
        scale = std::max(scale, double(std::fabs(h1[i])));
      }
      return d / scale;
    };
    double diffs[2];
    for (int rounded = 1; rounded >= 0; --rounded) {
      fill<<<1024, 256>>>(a, na, 1, rounded);
      fill<<<1024, 256>>>(b, nb, 2, rounded);
      packed();
      gemm16();
      fast16();
      CHECK(cudaDeviceSynchronize());
      diffs[1 - rounded] = rel_diff();
    }
    const float t_pack = timed(packed), t_gemm = timed(gemm16), t_fast = timed(fast16);
    std::printf("%-16s %6d %6d %6d  %10.3f %10.3f %10.3f  %12.3g %12.3g\n", s.what, s.m, s.k, s.n, t_pack, t_gemm, t_fast,
                diffs[0], diffs[1]);
    for (void* p : {(void*)a, (void*)b, (void*)c1, (void*)c2, (void*)a16, (void*)b16}) cudaFree(p);
  }
  return 0;
}
