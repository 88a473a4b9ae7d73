// A model's predictions for examples without labels (distrain predict): each example's
// class, the argmax of the model's output, and, when asked for, its class probabilities:
// the softmax of the outputs for a model trained on logits (loss.from_logits, the
// default), else the outputs themselves (a model that ends in a softmax).
#pragma once
#include <functional>

#include "core/io/predictions_file.hpp"
#include "core/model/loss.hpp"
#include "core/model/model.hpp"
#include "datasets/dataset.hpp"

namespace distrain {

// Inference mode, `batch` examples at a time; after each batch, report(done, total).
Predictions predict(Model& model, const LossSpec& loss, const Dataset& inputs, int64_t batch, bool probabilities,
                    const std::function<void(int64_t, int64_t)>& report);

}  // namespace distrain
