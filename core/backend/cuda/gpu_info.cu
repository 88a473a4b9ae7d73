// Queries the CUDA runtime, cuDNN, cuBLAS and NCCL for `distrain info`. Works on a
// machine without a GPU or driver: the problem is reported instead of thrown.
#include <cublas_v2.h>
#include <dlfcn.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <fmt/format.h>
#include <nccl.h>

#include "core/backend/cuda/cuda_unavailable.hpp"
#include "core/backend/gpu_info.hpp"

namespace distrain {

std::string cuda_unavailable_reason(int cuda_error) {
  const auto e = static_cast<cudaError_t>(cuda_error);
  if (e != cudaErrorInsufficientDriver && e != cudaErrorNoDevice) return cudaGetErrorString(e);
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver) return "no NVIDIA driver found (libcuda.so.1 is not installed)";
  dlclose(driver);
  if (e == cudaErrorNoDevice) return "the NVIDIA driver sees no GPU";
  int driver_version = 0, runtime = 0;
  cudaDriverGetVersion(&driver_version);
  cudaRuntimeGetVersion(&runtime);
  return fmt::format("the NVIDIA driver supports CUDA {}.{}, older than this build's CUDA {}.{}: update the driver",
                     driver_version / 1000, driver_version % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
}

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
  int major = 0, minor = 0, patch = 0;  // the library's version, which needs no GPU
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    info.cublas = fmt::format("{}.{}.{}", major, minor, patch);
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    info.problem = cuda_unavailable_reason(e);
    return info;
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
