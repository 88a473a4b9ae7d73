#include "core/model/loss.hpp"

namespace distrain {

Loss::Loss(LossSpec spec, Backend& backend) : spec_(spec), backend_(backend), stats_(backend, Shape{2}) {}

void Loss::enqueue(const Tensor& out, const Tensor& labels, float grad_scale, Tensor dout, Tensor stats) {
  DT_CHECK(out.shape.rank() >= 2, "loss expects (batch, ..., classes) output, got {}", out.shape.str());
  const int64_t classes = out.shape[out.shape.rank() - 1];
  // (N, K) or (N, T, K) as (rows, K): a sequence model's loss is per position.
  const Tensor output = out.rows(classes), doutput = dout.empty() ? dout : dout.rows(classes);
  DT_CHECK(labels.numel() == output.shape[0], "{} labels for output {}", labels.numel(), out.shape.str());
  if (spec_.type == LossType::sparse_categorical_crossentropy)
    backend_.sparse_cross_entropy(output, labels, spec_.from_logits, grad_scale, doutput, stats);
  else
    backend_.mean_squared_error(output, labels, grad_scale, doutput, stats);
}

LossStats Loss::compute(const Tensor& output, const Tensor& labels, float grad_scale, Tensor doutput) {
  enqueue(output, labels, grad_scale, doutput, stats_.view());
  float host[2];
  backend_.download(stats_.view(), host);
  return LossStats{host[0], static_cast<int64_t>(host[1]), labels.numel()};
}

}  // namespace distrain
