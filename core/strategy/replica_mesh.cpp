#include "core/strategy/replica_mesh.hpp"

#include <fmt/ranges.h>

#include <algorithm>

#include "core/backend/backend.hpp"
#include "core/backend/cuda_plugin.hpp"

namespace distrain {

ReplicaMesh::ReplicaMesh(const Recipe& recipe, Workers workers) {
  const StrategySpec& spec = recipe.strategy;
  if (workers == Workers::always || (workers == Workers::when_launched && launcher_size() > 1))
    workers_ = std::make_unique<MpiCommunicator>(spec.timeout_seconds);
  std::vector<Device> devices;
  for (const auto& text : spec.devices) {
    devices.push_back(Device::parse(text, recipe.file + ": strategy.devices"));
    backends_.push_back(&backend_for(devices.back()));
  }
  const int n = static_cast<int>(devices.size());
  auto group = std::make_shared<LocalGroup>(n);
  for (int r = 0; r < n; ++r) local_.push_back(std::make_unique<LocalCommunicator>(group, r));
  make_gpu_levels(devices, spec);
  for (size_t i = 0; i < devices.size(); ++i) {
    Communicator* gpu_local = gpu_local_.empty() ? nullptr : gpu_local_[i].get();
    CommLevels levels{local_[i].get(), workers_.get(), gpu_local, gpu_workers_.get()};
    meshes_.push_back(Mesh::data_axis(std::make_shared<HierarchicalCommunicator>(levels, HostStaging(*backends_[i])), {group}));
  }
}

void ReplicaMesh::make_gpu_levels(const std::vector<Device>& devices, const StrategySpec& spec) {
  const bool all_cuda = std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
  const bool shared_gpu = shares_a_gpu(devices);  // with nccl, the recipe was refused (parse_strategy)
  const std::string& ops = spec.mirrored.cross_device_ops;
  const bool nccl_local = all_cuda && !shared_gpu && devices.size() > 1 && (ops == "nccl" || ops == "auto");
  const bool one_gpu = all_cuda && devices.size() == 1;
  bool nccl_workers = workers_ && (spec.multi_worker.communication == "nccl" || (spec.multi_worker.communication == "auto" && one_gpu));
  DT_USER_CHECK(!nccl_workers || one_gpu, "strategy.communication = \"nccl\" takes one cuda device per worker, got [{}]",
                fmt::join(spec.devices, ", "));
  if (nccl_workers && workers_->any_equal_on_a_host(cuda_plugin().pci_location(devices.front().index))) {
    DT_USER_CHECK(spec.multi_worker.communication != "nccl",
                  "strategy.communication = \"nccl\": workers share {} on one host and NCCL refuses two ranks on one GPU; "
                  "use \"ring\" or \"auto\" (GPU tensors then go through host memory)", devices.front().str());
    nccl_workers = false;
  }
  if (nccl_local) gpu_local_ = cuda_plugin().nccl_local(backends_);
  if (nccl_workers) gpu_workers_ = cuda_plugin().nccl_world(*workers_, *backends_[0]);
}

}  // namespace distrain
