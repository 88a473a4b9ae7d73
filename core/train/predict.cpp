#include "core/train/predict.hpp"

#include <algorithm>
#include <cmath>

#include "core/base/error.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

// Examples [first, first + count) as float32 values, as the loader gives them to training.
void copy_examples(const Dataset& inputs, int64_t first, int64_t count, std::vector<float>& out) {
  const auto per = static_cast<size_t>(inputs.example_shape.numel());
  const size_t begin = static_cast<size_t>(first) * per, end = begin + static_cast<size_t>(count) * per;
  out.resize(end - begin);
  if (!inputs.pixels.empty()) std::copy(inputs.pixels.begin() + static_cast<long>(begin), inputs.pixels.begin() + static_cast<long>(end), out.begin());
  else std::copy(inputs.floats.begin() + static_cast<long>(begin), inputs.floats.begin() + static_cast<long>(end), out.begin());
}

// One example's outputs (C) into its class and, when `probabilities` is given, its C probabilities.
int32_t classify(const float* outputs, int64_t classes, bool from_logits, float* probabilities) {
  const float* best = std::max_element(outputs, outputs + classes);
  if (probabilities) {
    if (!from_logits) {
      std::copy(outputs, outputs + classes, probabilities);
    } else {
      double sum = 0;  // shifted by the largest logit, so that exp cannot overflow
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(outputs[c]) - *best);
      for (int64_t c = 0; c < classes; ++c)
        probabilities[c] = static_cast<float>(std::exp(static_cast<double>(outputs[c]) - *best) / sum);
    }
  }
  return static_cast<int32_t>(best - outputs);
}

}  // namespace

Predictions predict(Model& model, const LossSpec& loss, const Dataset& inputs, int64_t batch, bool probabilities,
                    const std::function<void(int64_t, int64_t)>& report) {
  DT_USER_CHECK(!probabilities || loss.type == LossType::sparse_categorical_crossentropy,
                "--probabilities: this model was trained with loss mean_squared_error; its outputs are not class probabilities");
  const int64_t n = inputs.examples(), classes = model.output_shape().numel();
  Backend& backend = model.backend();
  Predictions p;
  p.num_classes = classes;
  p.classes.resize(static_cast<size_t>(n));
  if (probabilities) p.probabilities.resize(static_cast<size_t>(n * classes));
  std::vector<float> host_in, host_out;
  Buffer x;
  for (int64_t first = 0; first < n; first += batch) {
    const int64_t count = std::min(batch, n - first);
    copy_examples(inputs, first, count, host_in);
    if (x.empty() || x.shape()[0] != count) x = Buffer(backend, model.input_shape().batched(count));  // (count, input...)
    backend.upload(host_in.data(), x.view());
    Ctx ctx{backend, false};
    const Tensor out = model.forward(ctx, x.view());  // (count, C)
    host_out.resize(static_cast<size_t>(count * classes));
    backend.download(out, host_out.data());
    for (int64_t i = 0; i < count; ++i)
      p.classes[static_cast<size_t>(first + i)] =
          classify(host_out.data() + i * classes, classes, loss.from_logits,
                   probabilities ? p.probabilities.data() + (first + i) * classes : nullptr);
    report(first + count, n);
  }
  return p;
}

}  // namespace distrain
