#include "core/backend/backend.hpp"

#include <omp.h>

#include <map>
#include <mutex>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/gpu_info.hpp"

namespace distrain {

namespace {
int g_cpu_threads = 0;
}

void set_cpu_threads(int threads) {
  DT_USER_CHECK(threads >= 0, "threads must be >= 0 (0 = all cores), got {}", threads);
  g_cpu_threads = threads;
  if (threads > 0) omp_set_num_threads(threads);
}

int cpu_threads() { return g_cpu_threads > 0 ? g_cpu_threads : omp_get_max_threads(); }

Backend& backend_for(const Device& device) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Backend>> backends;
  std::lock_guard lock(mutex);
  auto& slot = backends[device.str()];
  if (!slot) {
    if (device.is_cpu()) {
      slot = std::make_unique<CpuBackend>(device.index);
    } else {
      // The cuDNN/cuBLAS compute backend is not part of this version; say so rather than
      // fall back to the CPU behind the user's back.
      throw UserError(fmt::format("device {}: {}; use a cpu device (`distrain info` lists what this build has)",
                                  device.str(),
                                  gpu_info().built ? "the CUDA compute backend is not in this version yet"
                                                   : "this distrain was built without CUDA"));
    }
  }
  return *slot;
}

#ifndef DISTRAIN_WITH_CUDA
GpuInfo gpu_info() { return GpuInfo{}; }
#endif

}  // namespace distrain
