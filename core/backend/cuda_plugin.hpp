// The CUDA side of distrain (the CUDA backend and the NCCL communicator) is a plugin,
// libdistrain_cuda.so, opened with dlopen the first time a cuda device is asked for. The
// executable itself links no CUDA library, so it starts and trains on the CPU on machines
// that have none, and says which library is missing when a GPU is asked for.
//
// The plugin is looked for in $DISTRAIN_CUDA_PLUGIN (a path), else beside the executable,
// else in ../lib from it (the bundle's layout). It resolves distrain's own symbols from the
// executable (built with ENABLE_EXPORTS), so it is built with, and only loads into, the
// same distrain build.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/backend/gpu_info.hpp"
#include "core/comm/communicator.hpp"

namespace distrain {

class MpiCommunicator;

class CudaPlugin {
 public:
  virtual ~CudaPlugin() = default;
  virtual GpuInfo info() = 0;
  // The backend of GPU `index`; throws UserError when there is no such GPU.
  virtual std::unique_ptr<Backend> make_backend(int index) = 0;
  // One NCCL communicator per backend, each a distinct GPU of this process, ordered after
  // the work on that backend's stream.
  virtual std::vector<std::unique_ptr<Communicator>> nccl_local(const std::vector<Backend*>& gpus) = 0;
  // GPU `index`'s place on the PCI bus (domain, bus, device) as one number below 2^24: the
  // same for one GPU in every process, whatever CUDA_VISIBLE_DEVICES numbers it there.
  virtual int pci_location(int index) = 0;
  // This process's rank in an NCCL communicator over every MPI rank (one GPU per rank).
  virtual std::unique_ptr<Communicator> nccl_world(MpiCommunicator& mpi, Backend& gpu) = 0;
};

// The plugin, opened once; throws UserError saying why it cannot be loaded (not built,
// or a CUDA library missing, named as the dynamic loader names it).
CudaPlugin& cuda_plugin();

// Where the plugin was found ("" if nowhere), and why it cannot load ("" if it can).
struct CudaPluginStatus {
  std::string path, problem;
};
CudaPluginStatus cuda_plugin_status();

}  // namespace distrain

// The plugin's one exported entry point.
extern "C" distrain::CudaPlugin* distrain_cuda_plugin();
