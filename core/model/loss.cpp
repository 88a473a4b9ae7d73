#include "core/model/loss.hpp"

namespace distrain {

Loss::Loss(LossSpec spec, Backend& backend) : spec_(spec), backend_(backend), stats_(backend, Shape{2}) {}

void Loss::enqueue(const Tensor& output, const Tensor& labels, float grad_scale, Tensor doutput, Tensor stats) {
  DT_CHECK(output.shape.rank() == 2, "loss expects (batch, classes) output, got {}", output.shape.str());
  if (spec_.type == LossType::sparse_categorical_crossentropy)
    backend_.sparse_cross_entropy(output, labels, spec_.from_logits, grad_scale, doutput, stats);
  else
    backend_.mean_squared_error(output, labels, grad_scale, doutput, stats);
}

LossStats Loss::compute(const Tensor& output, const Tensor& labels, float grad_scale, Tensor doutput) {
  enqueue(output, labels, grad_scale, doutput, stats_.view());
  float host[2];
  backend_.download(stats_.view(), host);
  return LossStats{host[0], static_cast<int64_t>(host[1]), output.shape[0]};
}

}  // namespace distrain
