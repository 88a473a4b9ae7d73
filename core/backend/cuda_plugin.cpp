#include "core/backend/cuda_plugin.hpp"

#include <dlfcn.h>

#include <filesystem>

#include "core/base/error.hpp"
#include "core/base/plugin_path.hpp"

namespace distrain {

namespace {

namespace fs = std::filesystem;
constexpr const char* kPluginName = "libdistrain_cuda.so";

struct Loaded {
  CudaPluginStatus status;
  CudaPlugin* plugin = nullptr;
};

Loaded load() {
  Loaded l;
  l.status.path = find_plugin("DISTRAIN_CUDA_PLUGIN", kPluginName);
  if (!l.status.path.empty() && !fs::exists(l.status.path)) {
    l.status.problem = fmt::format("DISTRAIN_CUDA_PLUGIN={} does not exist", l.status.path);
    return l;
  }
  if (l.status.path.empty()) {
    l.status.problem = fmt::format("this distrain has no CUDA plugin ({} is neither beside the executable nor in "
                                   "../lib); rebuild with the CUDA toolkit, cuDNN and NCCL installed",
                                   kPluginName);
    return l;
  }
  // Never closed: backends and communicators from it live until exit.
  void* handle = dlopen(l.status.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    l.status.problem = fmt::format("the CUDA plugin cannot load: {}; install the CUDA runtime, cuBLAS, cuDNN and "
                                   "NCCL, or run through the bundle's bin/distrain-gpu",
                                   dlerror());
    return l;
  }
  auto* entry = reinterpret_cast<CudaPlugin* (*)()>(dlsym(handle, "distrain_cuda_plugin"));
  if (!entry) {
    l.status.problem = fmt::format("{} is not a distrain CUDA plugin (no distrain_cuda_plugin)", l.status.path);
    return l;
  }
  l.plugin = entry();
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

CudaPlugin& cuda_plugin() {
  const Loaded& l = loaded();
  if (!l.plugin) throw UserError(l.status.problem);
  return *l.plugin;
}

CudaPluginStatus cuda_plugin_status() { return loaded().status; }

GpuInfo gpu_info() {
  const Loaded& l = loaded();
  if (l.plugin) return l.plugin->info();
  GpuInfo info;
  info.built = !l.status.path.empty();
  info.problem = l.status.problem;
  return info;
}

}  // namespace distrain
