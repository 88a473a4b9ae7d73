// Queries the CUDA runtime, cuDNN, cuBLAS and NCCL for `distrain info`. Works on a
// machine without a GPU or driver: the problem is reported instead of thrown.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>
#include <nccl.h>

#include "core/backend/gpu_info.hpp"

namespace distrain {

GpuInfo query_gpu_info() {
  GpuInfo info;
  info.built = true;
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  info.cuda_runtime = fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10);
  const size_t cudnn = cudnnGetVersion();
  info.cudnn = fmt::format("{}.{}.{}", cudnn / 10000, cudnn % 10000 / 100, cudnn % 100);
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess)
    info.nccl = fmt::format("{}.{}.{}", nccl / 10000, nccl % 10000 / 100, nccl % 100);
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    info.problem = cudaGetErrorString(e);
    return info;
  }
  int cublas = 0;
  cublasHandle_t handle = nullptr;
  if (count > 0 && cublasCreate(&handle) == CUBLAS_STATUS_SUCCESS) {
    cublasGetVersion(handle, &cublas);
    cublasDestroy(handle);
    info.cublas = fmt::format("{}.{}.{}", cublas / 10000, cublas % 10000 / 100, cublas % 100);
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, i);
    info.devices.push_back(fmt::format("cuda:{} {} ({:.1f} GiB, sm_{}{})", i, p.name,
                                       static_cast<double>(p.totalGlobalMem) / (1 << 30), p.major, p.minor));
  }
  if (count == 0) info.problem = "no CUDA device visible";
  return info;
}

}  // namespace distrain
