#include "core/train/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/base/rng.hpp"

namespace distrain {

int32_t sample_token(std::vector<float> logits, const SamplingSpec& spec, double uniform) {
  const auto vocabulary = static_cast<int64_t>(logits.size());
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  // Likeliest first; ties keep the lower token, so a seed gives one text everywhere.
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (spec.temperature <= 0) return order[0];
  const int64_t k = spec.top_k > 0 ? std::min(spec.top_k, vocabulary) : vocabulary;
  std::vector<double> p(static_cast<size_t>(k));
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    p[static_cast<size_t>(i)] = std::exp((logits[order[i]] - logits[order[0]]) / spec.temperature);
    sum += p[static_cast<size_t>(i)];
  }
  double at = uniform * sum;
  for (int64_t i = 0; i < k; ++i) {
    at -= p[static_cast<size_t>(i)];
    if (at < 0) return order[i];
  }
  return order[k - 1];
}

// A context shorter than the model's sequence is padded after its end: causal attention
// keeps the padding from reaching the positions before it.
void generate(Model& model, std::vector<int32_t>& context, const SamplingSpec& spec,
              const std::function<bool(int32_t)>& on_token) {
  DT_CHECK(!context.empty(), "generate from an empty context");
  Backend& backend = model.backend();
  const int64_t t = model.input_shape()[0], vocabulary = model.output_shape()[1];
  Buffer input(backend, Shape{1, t}, DType::i32);
  std::vector<float> logits(static_cast<size_t>(t * vocabulary));
  Rng rng(derive_seed(spec.seed, 0x6e7));
  Ctx ctx{backend, false, 0};
  for (int64_t n = 0; n < spec.tokens; ++n) {
    const auto used = std::min<int64_t>(t, static_cast<int64_t>(context.size()));
    std::vector<int32_t> window(context.end() - used, context.end());
    window.resize(static_cast<size_t>(t), 0);
    backend.upload(window.data(), input.view());
    backend.download(model.forward(ctx, input.view()), logits.data());
    const auto last = logits.begin() + (used - 1) * vocabulary;
    const int32_t next = sample_token(std::vector<float>(last, last + vocabulary), spec, rng.uniform(0, 1));
    context.push_back(next);
    if (!on_token(next)) return;
  }
}

}  // namespace distrain
