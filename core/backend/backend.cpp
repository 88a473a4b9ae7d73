#include "core/backend/backend.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cuda_plugin.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {
int g_cpu_threads = 0;
std::atomic<bool> g_allow_tf32{false};
}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32 = allow; }
bool allow_tf32() { return g_allow_tf32; }

void set_cpu_threads(int threads) {
  DT_USER_CHECK(threads >= 0, "threads must be >= 0 (0 = all cores), got {}", threads);
  g_cpu_threads = threads;
  if (threads > 0) omp_set_num_threads(threads);
}

int cpu_threads() { return g_cpu_threads > 0 ? g_cpu_threads : omp_get_max_threads(); }

int cpu_cores() { return omp_get_num_procs(); }

void check_same_numel(const Tensor& a, const Tensor& b) {
  DT_CHECK(a.numel() == b.numel(), "element counts differ: {} vs {}", a.shape.str(), b.shape.str());
}

int64_t gather_width(const Tensor& table, const Tensor& rows, const Tensor& out) {
  DT_CHECK(rows.dtype == DType::i32 && rows.shape.rank() == 1, "gather rows must be int32 (n), got {} {}",
           dtype_name(rows.dtype), rows.shape.str());
  DT_CHECK(table.shape.rank() >= 1 && out.shape.rank() == table.shape.rank() && out.shape[0] == rows.numel(),
           "gather of {} rows from {} into {}", rows.numel(), table.shape.str(), out.shape.str());
  const bool images = (table.dtype == DType::u8 || table.dtype == DType::f32) && out.dtype == DType::f32;
  DT_CHECK(images || (table.dtype == DType::i32 && out.dtype == DType::i32), "gather from {} into {}",
           dtype_name(table.dtype), dtype_name(out.dtype));
  const int64_t width = table.shape[0] ? table.numel() / table.shape[0] : 0;
  DT_CHECK(out.numel() == rows.numel() * width, "gather of {}-value examples into {}", width, out.shape.str());
  return width;
}

std::string Backend::bf16_matmul_unavailable() const {
  return fmt::format("{} has no bf16 matrix products in distrain yet (run in \"float32\")", device().str());
}

void Backend::gemm_bf16(bool, bool, const Tensor&, const Tensor&, float, Tensor) {
  DT_CHECK(false, "gemm_bf16 on {}: {}", device().str(), bf16_matmul_unavailable());
}

void Backend::to_bf16(Tensor, Tensor) { DT_CHECK(false, "to_bf16 on {}: {}", device().str(), bf16_matmul_unavailable()); }

void Backend::rounded_bf16(const Tensor&, Tensor) {
  DT_CHECK(false, "rounded_bf16 on {}: {}", device().str(), bf16_matmul_unavailable());
}

void Backend::from_bf16(const Tensor&, Tensor) {
  DT_CHECK(false, "from_bf16 on {}: {}", device().str(), bf16_matmul_unavailable());
}

// Vocabulary-parallel ops: CPU devices only so far.
namespace {
[[noreturn]] void no_vocabulary_slices(const Device& device) {
  throw UserError(fmt::format("{} has no vocabulary-parallel embedding or cross-entropy yet: set "
                              "strategy.vocab_parallel = false", device.str()));
}
}  // namespace

void Backend::embedding_slice(const Tensor&, const Tensor&, int64_t, Tensor) { no_vocabulary_slices(device()); }
void Backend::embedding_slice_backward(const Tensor&, int64_t, const Tensor&, Tensor) { no_vocabulary_slices(device()); }
void Backend::class_slice_max(const Tensor&, Tensor) { no_vocabulary_slices(device()); }
void Backend::class_slice_sums(const Tensor&, const Tensor&, int64_t, const Tensor&, Tensor) { no_vocabulary_slices(device()); }
void Backend::class_slice_cross_entropy(const Tensor&, const Tensor&, int64_t, const Tensor&, const Tensor&, float, Tensor,
                                        Tensor) {
  no_vocabulary_slices(device());
}

GemmDims gemm_dims(bool ta, bool tb, const Tensor& a, const Tensor& b, const Tensor& c) {
  DT_CHECK(a.shape.rank() == 2 && b.shape.rank() == 2 && c.shape.rank() == 2, "gemm needs 2-D tensors");
  const GemmDims d{ta ? a.shape[1] : a.shape[0], ta ? a.shape[0] : a.shape[1], tb ? b.shape[0] : b.shape[1]};
  const int64_t kb = tb ? b.shape[1] : b.shape[0];
  DT_CHECK(d.k == kb && c.shape[0] == d.m && c.shape[1] == d.n, "gemm shapes {}{} x {}{} -> {}", a.shape.str(),
           ta ? "^T" : "", b.shape.str(), tb ? "^T" : "", c.shape.str());
  return d;
}

bool all_finite(Backend& backend, const Tensor& t) {
  DT_CHECK(t.dtype == DType::f32, "all_finite of {}", dtype_name(t.dtype));
  const int64_t n = t.numel();
  if (t.device.is_cpu()) return cpu_all_finite(t.f32(), n);
  Buffer sums(backend, Shape{kFinitenessColumns});
  finiteness_sums(backend, t, sums.view());
  float host[kFinitenessColumns];
  backend.download(sums.view(), host);
  return std::all_of(host, host + kFinitenessColumns, [](float x) { return std::isfinite(x); });
}

double sum_of_squares(Backend& backend, const Tensor& t) {
  DT_CHECK(t.dtype == DType::f32, "sum_of_squares of {}", dtype_name(t.dtype));
  const int64_t n = t.numel();
  if (n == 0) return 0.0;
  if (t.device.is_cpu()) return cpu_sum_of_squares(t.f32(), n);
  const Tensor row{t.data, Shape{1, n}, DType::f32, t.device};
  Buffer dot(backend, Shape{1, 1});
  backend.gemm(false, true, 1.0f, row, row, 0.0f, dot.view());
  float host = 0;
  backend.download(dot.view(), &host);
  return host;
}

void finiteness_sums(Backend& backend, const Tensor& t, Tensor sums) {
  DT_CHECK(t.dtype == DType::f32 && sums.numel() == kFinitenessColumns, "finiteness sums of {} into {}",
           dtype_name(t.dtype), sums.shape.str());
  const int64_t n = t.numel();
  const int64_t columns = n % kFinitenessColumns == 0 ? kFinitenessColumns : 1;
  backend.fill(sums, 0.0f);
  if (n) backend.bias_grad(Tensor{t.data, Shape{n / columns, columns}, DType::f32, t.device}, sums.range(0, columns));
}

float adam_step_size(const AdamHyper& h) {
  const double t = static_cast<double>(h.step);
  return static_cast<float>(h.learning_rate * std::sqrt(1.0 - std::pow(h.beta_2, t)) / (1.0 - std::pow(h.beta_1, t)));
}

Backend& backend_for(const Device& device) {
  static std::mutex mutex;
  // Never destroyed: at exit the CUDA runtime may be torn down before any static
  // destructor would run, and a backend outlives every buffer anyway.
  static auto* backends = new std::map<std::string, std::unique_ptr<Backend>>;
  std::lock_guard lock(mutex);
  auto& slot = (*backends)[device.str()];
  if (!slot) {
    if (device.is_cpu()) {
      slot = std::make_unique<CpuBackend>(device.index);
    } else {
      // Never fall back to the CPU behind the user's back: no plugin is an error.
      const std::string problem = cuda_plugin_status().problem;
      DT_USER_CHECK(problem.empty(), "device {}: {}", device.str(), problem);
      slot = cuda_plugin().make_backend(device.index);
    }
  }
  return *slot;
}

}  // namespace distrain
