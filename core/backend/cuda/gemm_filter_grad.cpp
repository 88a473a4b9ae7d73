#include "core/backend/cuda/gemm_filter_grad.hpp"

#include <algorithm>

#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/cuda/cuda_check.hpp"

namespace distrain {

namespace {

constexpr int64_t kMaxColFloats = int64_t{16} << 20;  // 64 MiB of im2col per chunk

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

bool GemmFilterGrad::applies(const Conv2DSpec& s, int64_t batch) {
  const int64_t k = s.kernel_h * s.kernel_w * s.in_c;
  return batch * s.out_h * s.out_w < cuda::kMaxInt32Index && k <= kMaxColFloats / kSliceRows &&
         k * s.out_c < cuda::kMaxInt32Index;
}

GemmFilterGrad::GemmFilterGrad(CudaBackend& be, const Conv2DSpec& s, int64_t batch)
    : be_(be),
      windows_{s.in_h, s.in_w, s.in_c, s.out_h, s.out_w, s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_top,
               s.pad_left},
      positions_(batch * s.out_h * s.out_w),
      k_(s.kernel_h * s.kernel_w * s.in_c),
      cout_(s.out_c) {
  // Whole slices per chunk, as many as the col buffer holds.
  chunk_rows_ = std::min(positions_, std::max<int64_t>(1, kMaxColFloats / k_ / kSliceRows) * kSliceRows);
  col_ = Buffer(be_, Shape{chunk_rows_, k_});
  partials_ = Buffer(be_, Shape{ceil_div(chunk_rows_, kSliceRows), k_ * cout_});
}

void GemmFilterGrad::accumulate(const float* x, const float* dy, float* dw) {
  auto lock = be_.enter();
  cublasHandle_t h = be_.cublas();
  DT_CUBLAS(cublasSetMathMode(h, be_.tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  const float one = 1.0f, zero = 0.0f;
  const int cout = static_cast<int>(cout_), k = static_cast<int>(k_), slice = static_cast<int>(kSliceRows);
  float* col = col_.view().f32();
  float* partials = partials_.view().f32();
  for (int64_t first = 0; first < positions_; first += chunk_rows_) {
    const int64_t rows = std::min(chunk_rows_, positions_ - first);
    cuda::im2col(windows_, x, first, rows, col, be_.stream());
    const int64_t full = rows / kSliceRows, tail = rows % kSliceRows;
    const float* dy_chunk = dy + first * cout_;
    // Row-major partial (K, cout) = col_slice^T dy_slice is column-major (cout, K) =
    // dy_slice (cout x R, ld cout) times col_slice^T (R x K from the (K x R, ld K) view).
    if (full > 0)
      DT_CUBLAS(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, cout, k, slice, &one, dy_chunk, cout,
                                          kSliceRows * cout_, col, k, kSliceRows * k_, &zero, partials, cout, k_ * cout_,
                                          static_cast<int>(full)));
    if (tail > 0)
      DT_CUBLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, cout, k, static_cast<int>(tail), &one,
                            dy_chunk + full * kSliceRows * cout_, cout, col + full * kSliceRows * k_, k, &zero,
                            partials + full * k_ * cout_, cout));
    const int64_t slices = full + (tail > 0 ? 1 : 0);
    cuda::bias_grad(partials, slices, k_ * cout_, dw, be_.workspace(cuda::column_sum_scratch(slices, k_ * cout_)),
                    be_.stream());
  }
}

double GemmFilterGrad::time_ms() {
  auto lock = be_.enter();
  const int64_t batch = positions_ / (windows_.out_h * windows_.out_w);
  Buffer x(be_, Shape{batch, windows_.h, windows_.w, windows_.c}), dy(be_, Shape{positions_, cout_}),
      dw(be_, Shape{k_, cout_});
  be_.fill(x.view(), 0.5f);
  be_.fill(dy.view(), 0.25f);
  be_.fill(dw.view(), 0.0f);
  cudaEvent_t start = nullptr, stop = nullptr;
  DT_CUDA(cudaEventCreate(&start));
  DT_CUDA(cudaEventCreate(&stop));
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {  // the first is the warm-up
    DT_CUDA(cudaEventRecord(start, be_.stream()));
    accumulate(x.view().f32(), dy.view().f32(), dw.view().f32());
    DT_CUDA(cudaEventRecord(stop, be_.stream()));
    DT_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    DT_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (rep > 0) best = std::min(best, static_cast<double>(ms));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace distrain
