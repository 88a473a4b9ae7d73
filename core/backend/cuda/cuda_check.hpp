// Checks every CUDA runtime, cuBLAS, cuDNN and NCCL call: a failure throws Error with
// the call's text and the library's own description of what went wrong.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/base/error.hpp"

#define DT_CUDA(call)                                                                                        \
  do {                                                                                                       \
    const cudaError_t dt_e_ = (call);                                                                        \
    if (dt_e_ != cudaSuccess)                                                                                \
      throw ::distrain::Error(fmt::format("cuda: {} failed: {} ({})", #call, cudaGetErrorString(dt_e_),      \
                                          cudaGetErrorName(dt_e_)));                                         \
  } while (0)

#define DT_CUBLAS(call)                                                                                      \
  do {                                                                                                       \
    const cublasStatus_t dt_s_ = (call);                                                                     \
    if (dt_s_ != CUBLAS_STATUS_SUCCESS)                                                                      \
      throw ::distrain::Error(fmt::format("cublas: {} failed: {}", #call, cublasGetStatusString(dt_s_)));    \
  } while (0)

#define DT_CUDNN(call)                                                                                       \
  do {                                                                                                       \
    const cudnnStatus_t dt_s_ = (call);                                                                      \
    if (dt_s_ != CUDNN_STATUS_SUCCESS)                                                                       \
      throw ::distrain::Error(fmt::format("cudnn: {} failed: {}", #call, cudnnGetErrorString(dt_s_)));       \
  } while (0)

// After a kernel launch: a bad configuration is reported at once, not at the next sync.
#define DT_CUDA_LAUNCHED() DT_CUDA(cudaGetLastError())
