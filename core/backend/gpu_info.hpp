// What the CUDA side of this build offers: library versions and visible GPUs.
// Without the CUDA plugin, `built` is false; when it exists but cannot load (a CUDA
// library missing), `built` is true, the lists are empty and `problem` says why.
#pragma once
#include <string>
#include <vector>

namespace distrain {

struct GpuInfo {
  bool built = false;           // the CUDA plugin (libdistrain_cuda.so) exists
  std::string cuda_runtime;     // e.g. "13.0"
  std::string cudnn, cublas, nccl;
  std::vector<std::string> devices;  // "cuda:0 NVIDIA H100 80GB HBM3 (79.1 GiB, sm_90)"
  std::string problem;          // why no device is usable (plugin not loadable, driver missing, ...)
};

GpuInfo gpu_info();

}  // namespace distrain
