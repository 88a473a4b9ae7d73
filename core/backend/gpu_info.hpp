// What the CUDA side of this build offers: library versions and visible GPUs.
// In a build without CUDA, `built` is false and the lists are empty.
#pragma once
#include <string>
#include <vector>

namespace distrain {

struct GpuInfo {
  bool built = false;           // compiled with the CUDA sources
  std::string cuda_runtime;     // e.g. "13.0"
  std::string cudnn, cublas, nccl;
  std::vector<std::string> devices;  // "cuda:0 NVIDIA H100 80GB HBM3 (79.1 GiB, sm_90)"
  std::string problem;          // why no device is visible (driver missing, ...)
};

GpuInfo gpu_info();

}  // namespace distrain
