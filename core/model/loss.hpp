// Loss: per-example losses summed over the local batch; the gradient is scaled by
// 1 / global batch (as tf.nn.compute_average_loss), never by the local batch, so that
// replicas' gradients sum to the gradient of the global mean. A sequence model's loss is
// per position (token): its output (N, T, K) has labels (N, T), every token counts as an
// example, and grad_scale is 1 / (tokens in the global batch).
#pragma once
#include <string>

#include "core/backend/backend.hpp"
#include "core/comm/communicator.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

enum class LossType { sparse_categorical_crossentropy, mean_squared_error };

struct LossSpec {
  LossType type = LossType::sparse_categorical_crossentropy;
  bool from_logits = true;
};

struct LossStats {
  double loss_sum = 0.0;  // sum of per-example losses
  int64_t correct = 0;    // argmax == label
  int64_t count = 0;      // examples (tokens for a sequence model)
  LossStats& operator+=(const LossStats& o) {
    loss_sum += o.loss_sum;
    correct += o.correct;
    count += o.count;
    return *this;
  }
  // Means over the examples counted, 0 without any (an epoch not validated).
  double mean_loss() const { return count ? loss_sum / static_cast<double>(count) : 0.0; }
  double accuracy() const { return count ? static_cast<double>(correct) / static_cast<double>(count) : 0.0; }
};

class Loss {
 public:
  Loss(LossSpec spec, Backend& backend);
  // output (N, K), labels (N) int32, or output (N, T, K), labels (N, T). Writes d(loss_sum * grad_scale)/d(output) into
  // doutput unless it is empty (evaluation).
  LossStats compute(const Tensor& output, const Tensor& labels, float grad_scale, Tensor doutput);
  // compute() without waiting: the loss and its gradient queued on the device, the loss
  // sum and correct count written into `stats` ((2,) float32 on the device) for whoever
  // reads them later (a training step's StepLedger), so that the GPU is never idle
  // while the host waits for a loss.
  void enqueue(const Tensor& output, const Tensor& labels, float grad_scale, Tensor doutput, Tensor stats);
  // Under vocabulary parallelism (core/model/tensor_plan.hpp) the output holds this rank's
  // slice of the classes, from class `first` on, and the loss combines the slices over
  // `tensor` (sparse cross-entropy from logits only): every rank of it gets the same sums.
  void set_class_slice(Communicator& tensor, int64_t first);
  // The device bytes the loss keeps for a batch of `rows` labels on class slices.
  static int64_t class_slice_bytes(int64_t rows) { return rows * 3 * static_cast<int64_t>(sizeof(float)); }

 private:
  void enqueue_on_slices(const Tensor& output, const Tensor& labels, float grad_scale, Tensor doutput, Tensor stats);

  LossSpec spec_;
  Backend& backend_;
  Buffer stats_;  // (2,): loss sum, correct count
  Communicator* tensor_ = nullptr;  // set_class_slice()
  int64_t first_class_ = 0;
  Buffer row_max_, row_sums_;  // (rows), (rows, 2): see Backend::class_slice_*
};

}  // namespace distrain
