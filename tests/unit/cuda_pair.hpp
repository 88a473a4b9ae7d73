// The GPU against its CPU twin in unit tests: the same values on both, compared by the
// largest difference relative to the CPU's largest value; GPU cases skip where there is none.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "core/backend/cuda_plugin.hpp"
#include "core/base/rng.hpp"
#include "core/tensor/buffer.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {

// Why the GPU cases cannot run here, or "" when they can.
inline std::string no_gpu() {
  const GpuInfo g = gpu_info();
  if (!g.built) return g.problem;
  if (g.devices.empty()) return "no CUDA device here (" + g.problem + ")";
  return "";
}

#define SKIP_WITHOUT_GPU()                        \
  if (const std::string why = no_gpu(); !why.empty()) { \
    MESSAGE("[skipped] " << why);                 \
    return;                                       \
  }

inline Backend& gpu() { return backend_for(Device{DeviceType::cuda, 0}); }

inline std::string temp_dir(const char* name) { return (std::filesystem::temp_directory_path() / name).string(); }

// The same values on the CPU and on the GPU.
struct Pair {
  Buffer c, g;
  Pair(const Shape& s, const std::vector<float>& v, DType dt = DType::f32) : c(cpu(), s, dt), g(gpu(), s, dt) {
    cpu().upload(v.data(), c.view());
    gpu().upload(v.data(), g.view());
  }
  Pair(const Shape& s, uint64_t seed, double lo = -1, double hi = 1)
      : Pair(s, random_vector(static_cast<size_t>(s.numel()), seed, lo, hi)) {}
  Tensor cv() const { return c.view(); }
  Tensor gv() const { return g.view(); }
};

// max |cpu - gpu| <= tol * max(|cpu|), over the whole tensor.
inline void check_pair(const Pair& p, const char* what, double tol = 1e-5) {
  INFO(what << " (a: cpu, b: gpu)");
  check_close(to_host(p.cv()), to_host(p.gv()), tol);
}

// n int32 values below k (labels, token ids) on both.
inline Pair labels(int64_t n, int64_t k, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ints(static_cast<size_t>(n));
  for (auto& v : ints) v = static_cast<int32_t>(rng.below(static_cast<uint64_t>(k)));
  Pair p(Shape{n}, std::vector<float>(static_cast<size_t>(n)), DType::i32);
  cpu().upload(ints.data(), p.cv());
  gpu().upload(ints.data(), p.gv());
  return p;
}

}  // namespace distrain::test
