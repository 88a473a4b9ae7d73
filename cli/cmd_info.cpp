// distrain info [--json]: version, build features and the devices this machine offers.
#include <dnnl.hpp>
#include <fstream>
#include <hdf5.h>
#include <thread>

#include "cli/commands.hpp"
#include "core/base/openmp_wait.hpp"
#include "core/backend/backend.hpp"
#include "core/backend/gpu_info.hpp"
#include "core/base/json.hpp"
#include "core/base/log.hpp"
#include "core/comm/mpi_communicator.hpp"
#include "datasets/sentencepiece_library.hpp"

namespace distrain::cli {

namespace {
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}
}  // namespace

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Version, build features and devices");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print one JSON object");
  cmd->callback([json] {
    if (*json) log::set_info_stream(stderr);
    const dnnl_version_t* d = dnnl_version();
    unsigned h5_major = 0, h5_minor = 0, h5_release = 0;
    H5get_libversion(&h5_major, &h5_minor, &h5_release);
    const GpuInfo gpu = gpu_info();
    const std::string onednn = fmt::format("{}.{}.{}", d->major, d->minor, d->patch);
    const std::string hdf5 = fmt::format("{}.{}.{}", h5_major, h5_minor, h5_release);
    const std::string mpi = mpi_library_version();
    const std::string sentencepiece = sentencepiece_status();
    std::vector<std::string> devices{fmt::format("cpu:0 {} ({} threads)", cpu_model(), cpu_threads())};
    devices.insert(devices.end(), gpu.devices.begin(), gpu.devices.end());
    if (*json) {
      const Json info = {{"version", DISTRAIN_VERSION}, {"onednn", onednn}, {"hdf5", hdf5}, {"mpi", mpi},
                         {"cuda_built", gpu.built}, {"cuda_runtime", gpu.cuda_runtime}, {"cudnn", gpu.cudnn},
                         {"cublas", gpu.cublas}, {"nccl", gpu.nccl}, {"cuda_compute", !gpu.cuda_runtime.empty()},
                         {"cuda_problem", gpu.problem}, {"devices", devices}, {"openmp_wait", openmp_wait_description()},
                         {"sentencepiece", sentencepiece}};
      fmt::print("{}\n", dump_line(info));
      return;
    }
    fmt::print("distrain {}\n", DISTRAIN_VERSION);
    fmt::print("  oneDNN   {} (CPU kernels)\n  HDF5     {}\n  MPI      {} (multi_worker_mirrored)\n", onednn, hdf5, mpi);
    fmt::print("  OpenMP   idle threads wait: {}\n", openmp_wait_description());
    fmt::print("  SentencePiece {}\n", sentencepiece);
    if (gpu.built && gpu.cuda_runtime.empty()) {
      fmt::print("  CUDA     plugin present, not usable: {}\n", gpu.problem);
    } else if (gpu.built) {
      fmt::print("  CUDA     compute backend built with runtime {}, cuDNN {}, NCCL {}{}\n", gpu.cuda_runtime, gpu.cudnn, gpu.nccl,
                 gpu.cublas.empty() ? "" : ", cuBLAS " + gpu.cublas);
    } else {
      fmt::print("  CUDA     not built (CPU only)\n");
    }
    fmt::print("devices\n");
    for (const auto& dev : devices) fmt::print("  {}\n", dev);
    if (!gpu.cuda_runtime.empty() && gpu.devices.empty()) fmt::print("  (no GPU: {})\n", gpu.problem);
  });
}

}  // namespace distrain::cli
