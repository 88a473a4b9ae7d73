// The CUDA plugin's entry point (see core/backend/cuda_plugin.hpp): what the executable
// may ask of the CUDA side, over the CUDA backend and the NCCL communicator.
#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/cuda/cuda_check.hpp"
#include "core/backend/cuda_plugin.hpp"
#include "core/comm/nccl/nccl_communicator.hpp"

namespace distrain {

namespace {

cudaStream_t stream_of(Backend& gpu) {
  auto* cuda = dynamic_cast<CudaBackend*>(&gpu);
  DT_CHECK(cuda != nullptr, "nccl: {} is not a CUDA backend", gpu.device().str());
  return cuda->stream();
}

class CudaPluginImpl final : public CudaPlugin {
 public:
  GpuInfo info() override { return query_gpu_info(); }

  std::unique_ptr<Backend> make_backend(int index) override { return make_cuda_backend(index); }

  std::vector<std::unique_ptr<Communicator>> nccl_local(const std::vector<Backend*>& gpus) override {
    std::vector<int> devices;
    std::vector<cudaStream_t> streams;
    for (Backend* g : gpus) {
      devices.push_back(g->device().index);
      streams.push_back(stream_of(*g));
    }
    std::vector<std::unique_ptr<Communicator>> comms;
    for (auto& c : NcclCommunicator::create_local(devices, streams)) comms.push_back(std::move(c));
    return comms;
  }

  int pci_location(int index) override {
    int domain = 0, bus = 0, device = 0;
    DT_CUDA(cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, index));
    DT_CUDA(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, index));
    DT_CUDA(cudaDeviceGetAttribute(&device, cudaDevAttrPciDeviceId, index));
    return (domain & 0xff) << 16 | (bus & 0xff) << 8 | (device & 0xff);  // < 2^24: exact as a float
  }

  std::unique_ptr<Communicator> nccl_world(MpiCommunicator& mpi, Backend& gpu) override {
    return NcclCommunicator::create_world(mpi, gpu.device().index, stream_of(gpu));
  }
};

}  // namespace

}  // namespace distrain

extern "C" __attribute__((visibility("default"))) distrain::CudaPlugin* distrain_cuda_plugin() {
  static distrain::CudaPluginImpl plugin;
  return &plugin;
}
