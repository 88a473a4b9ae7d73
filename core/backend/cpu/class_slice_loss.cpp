// The CPU backend's vocabulary-parallel cross-entropy (backend.hpp, class_slice_*): each
// rank holds logits (rows, K) for classes [first, first + K); the group's all-reduces
// between the passes give every rank each row's largest logit, the sum of exp(z - max) over
// all classes and the label's logit. Rows run in parallel, each by one thread in a fixed
// order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>

#include "core/backend/cpu/cpu_backend.hpp"

namespace distrain {

namespace {

struct Rows {
  int64_t n, k;
};

Rows rows_of(const Tensor& logits, const Tensor& labels) {
  const int64_t n = logits.shape[0];
  DT_CHECK(n > 0 && labels.numel() == n, "{} labels for logits {}", labels.numel(), logits.shape.str());
  return {n, logits.numel() / n};
}

}  // namespace

void CpuBackend::class_slice_max(const Tensor& logits, Tensor max) {
  const int64_t n = logits.shape[0], k = logits.numel() / n;
  DT_CHECK(max.numel() == n, "row maxima {} for logits {}", max.shape.str(), logits.shape.str());
  const float* z = logits.f32();
  float* m = max.f32();
#pragma omp parallel for if (n > kParallelRows)
  for (int64_t i = 0; i < n; ++i) m[i] = *std::max_element(z + i * k, z + (i + 1) * k);
}

void CpuBackend::class_slice_sums(const Tensor& logits, const Tensor& labels, int64_t first, const Tensor& max,
                                  Tensor sums) {
  const Rows rows = rows_of(logits, labels);
  const int64_t n = rows.n, k = rows.k;  // plain names: OpenMP regions cannot capture structured bindings (clang)
  DT_CHECK(max.numel() == n && sums.numel() == 2 * n, "sums {} for logits {}", sums.shape.str(), logits.shape.str());
  const float *z = logits.f32(), *m = max.f32();
  const int32_t* y = labels.i32();
  // Labels past the last class are refused before training (preflight), not here: a rank
  // sees its own classes only.
  for (int64_t i = 0; i < n; ++i) DT_CHECK(y[i] >= 0, "label {}", y[i]);
  float* s = sums.f32();
#pragma omp parallel for if (n > kParallelRows)
  for (int64_t i = 0; i < n; ++i) {
    const float* row = z + i * k;
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(row[j] - m[i]));
    const int64_t label = y[i] - first;
    s[2 * i] = static_cast<float>(sum);
    s[2 * i + 1] = label >= 0 && label < k ? row[label] : 0.0f;
  }
}

// loss = max + log(sum) - z[label]; correct where the label's logit is the largest;
// dz = (exp(z - max) / sum - one_hot(label)) * grad_scale on this rank's classes.
void CpuBackend::class_slice_cross_entropy(const Tensor& logits, const Tensor& labels, int64_t first, const Tensor& max,
                                           const Tensor& sums, float grad_scale, Tensor dlogits, Tensor stats) {
  const Rows rows = rows_of(logits, labels);
  const int64_t n = rows.n, k = rows.k;
  const float *z = logits.f32(), *m = max.f32(), *s = sums.f32();
  const int32_t* y = labels.i32();
  float* dz = dlogits.empty() ? nullptr : dlogits.f32();
  double loss_sum = 0.0;
  int64_t correct = 0;
#pragma omp parallel for reduction(+ : loss_sum, correct) if (n > kParallelRows)
  for (int64_t i = 0; i < n; ++i) {
    const double lse = m[i] + std::log(static_cast<double>(s[2 * i]));
    const float target = s[2 * i + 1];
    loss_sum += lse - target;
    correct += target >= m[i];
    if (!dz) continue;
    const float* row = z + i * k;
    const int64_t label = y[i] - first;
    for (int64_t j = 0; j < k; ++j)
      dz[i * k + j] = static_cast<float>((std::exp(row[j] - lse) - (j == label)) * grad_scale);
  }
  float* st = stats.f32();
  st[0] = static_cast<float>(loss_sum);
  st[1] = static_cast<float>(correct);
}

}  // namespace distrain
