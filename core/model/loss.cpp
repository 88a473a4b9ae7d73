#include "core/model/loss.hpp"

#include "core/backend/device_memory.hpp"

namespace distrain {

Loss::Loss(LossSpec spec, Backend& backend) : spec_(spec), backend_(backend), stats_(backend, Shape{2}) {}

void Loss::enqueue(const Tensor& out, const Tensor& labels, float grad_scale, Tensor dout, Tensor stats) {
  DT_CHECK(out.shape.rank() >= 2, "loss expects (batch, ..., classes) output, got {}", out.shape.str());
  const int64_t classes = out.shape[out.shape.rank() - 1];
  // (N, K) or (N, T, K) as (rows, K): a sequence model's loss is per position.
  const Tensor output = out.rows(classes), doutput = dout.empty() ? dout : dout.rows(classes);
  DT_CHECK(labels.numel() == output.shape[0], "{} labels for output {}", labels.numel(), out.shape.str());
  if (tensor_) return enqueue_on_slices(output, labels, grad_scale, doutput, stats);
  if (spec_.type == LossType::sparse_categorical_crossentropy)
    backend_.sparse_cross_entropy(output, labels, spec_.from_logits, grad_scale, doutput, stats);
  else
    backend_.mean_squared_error(output, labels, grad_scale, doutput, stats);
}

void Loss::set_class_slice(Communicator& tensor, int64_t first) {
  DT_CHECK(spec_.type == LossType::sparse_categorical_crossentropy && spec_.from_logits,
           "a loss on class slices is sparse cross-entropy from logits");
  tensor_ = &tensor;
  first_class_ = first;
}

// Megatron's vocabulary-parallel cross-entropy: two small all-reduces per batch, (rows)
// and (rows, 2), instead of gathering the (rows, vocabulary) logits.
void Loss::enqueue_on_slices(const Tensor& output, const Tensor& labels, float grad_scale, Tensor doutput, Tensor stats) {
  const int64_t rows = output.shape[0];
  if (row_max_.empty() || row_max_.shape()[0] < rows) {  // kept for the largest batch seen
    static const std::string kPurpose = "the loss's row sums over the vocabulary's slices";
    const MemoryPurpose purpose(kPurpose);
    row_max_ = Buffer(backend_, Shape{rows});
    row_sums_ = Buffer(backend_, Shape{rows, 2});
  }
  const Tensor max = row_max_.view().range(0, rows), sums = row_sums_.view().range(0, 2 * rows);
  backend_.class_slice_max(output, max);
  tensor_->all_reduce(max, ReduceOp::max);
  backend_.class_slice_sums(output, labels, first_class_, max, sums);
  tensor_->all_reduce(sums, ReduceOp::sum);
  backend_.class_slice_cross_entropy(output, labels, first_class_, max, sums, grad_scale, doutput, stats);
}

LossStats Loss::compute(const Tensor& output, const Tensor& labels, float grad_scale, Tensor doutput) {
  enqueue(output, labels, grad_scale, doutput, stats_.view());
  float host[2];
  backend_.download(stats_.view(), host);
  return LossStats{host[0], static_cast<int64_t>(host[1]), labels.numel()};
}

}  // namespace distrain
