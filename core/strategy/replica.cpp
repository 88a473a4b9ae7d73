#include "core/strategy/replica.hpp"

#include "core/base/rng.hpp"

namespace distrain {

Replica::Replica(const Recipe& recipe, Backend& backend, ModelSeams seams, Communicator* tensor)
    : backend_(backend),
      model_(std::make_unique<Model>(recipe.model(), recipe.file, backend, std::move(seams),
                                     tensor ? TensorGroup{tensor->rank(), tensor->size()} : TensorGroup{})),
      loss_(recipe.loss, backend),
      tensor_(tensor) {
  const bool tokens = recipe.data.token_data();
  DT_USER_CHECK(model_->output_shape().rank() == (tokens ? 2 : 1),
                "{}: the model's output is {}; {}", recipe.file, model_->output_shape().str(),
                tokens ? "a language model ends in (sequence, vocabulary), e.g. a dense layer on the sequence"
                       : "a classifier ends in (classes,), e.g. a dense layer");
  DT_USER_CHECK(tokens == (model_->input_dtype() == DType::i32), "{}: {}", recipe.file,
                tokens ? "token data needs a model that starts with an embedding layer"
                       : "a model that starts with an embedding layer needs token data (data.dataset = \"text\" or \"tokens\")");
}

void Replica::upload(const ReplicaSlice& slice, DataUse use) {
  if (images_.empty() || images_.shape()[0] != slice.count) {
    images_ = Buffer(backend_, model_->input_shape().batched(slice.count), model_->input_dtype());
    labels_ = Buffer(backend_, Shape{static_cast<int64_t>(slice.labels.size())}, DType::i32);
    rows_ = Buffer(backend_, Shape{slice.count}, DType::i32);
  }
  if (model_->input_dtype() == DType::i32) {  // token windows: ids and the next tokens
    DT_CHECK(static_cast<int64_t>(slice.tokens.size()) == images_.view().numel(), "slice of {} tokens for input {}",
             slice.tokens.size(), images_.shape().str());
    backend_.upload(slice.tokens.data(), images_.view());
    backend_.upload(slice.labels.data(), labels_.view());
    return;
  }
  if (!slice.indices.empty()) {  // the dataset is on this device: only the indices travel
    const DeviceData* data = data_[static_cast<size_t>(use)].get();
    DT_CHECK(data && static_cast<int64_t>(slice.indices.size()) == slice.count,
             "a slice of {} indices for a replica {} the dataset on its device", slice.indices.size(),
             data ? "with" : "without");
    for (int32_t i : slice.indices)  // checked here, where they are at hand: a GPU gather would read anywhere
      DT_CHECK(i >= 0 && i < data->labels().numel(), "example {} of a dataset of {}", i, data->labels().numel());
    backend_.upload(slice.indices.data(), rows_.view());
    backend_.gather_examples(data->examples(), rows_.view(), images_.view());
    backend_.gather_examples(data->labels(), rows_.view(), labels_.view());
    return;
  }
  DT_CHECK(static_cast<int64_t>(slice.images.size()) == images_.view().numel(), "slice of {} values for input {}",
           slice.images.size(), images_.shape().str());
  backend_.upload(slice.images.data(), images_.view());
  backend_.upload(slice.labels.data(), labels_.view());
}

void Replica::forward_backward(const ReplicaSlice& slice, float grad_scale, uint64_t step_seed, Tensor stats,
                               int64_t micro_batches) {
  if (micro_batches <= 1) {
    pass(slice, grad_scale, step_seed, stats);
    return;
  }
  if (micro_stats_.empty()) micro_stats_ = Buffer(backend_, Shape{2});
  backend_.fill(stats, 0.0f);
  for (int64_t m = 0; m < micro_batches; ++m) {
    const int64_t begin = slice.count * m / micro_batches, end = slice.count * (m + 1) / micro_batches;
    pass(slice.part(begin, end - begin), grad_scale, derive_seed(step_seed, static_cast<uint64_t>(m)), micro_stats_.view());
    if (end > begin) backend_.axpby(1.0f, micro_stats_.view(), 1.0f, stats);
  }
}

void Replica::pass(const ReplicaSlice& slice, float grad_scale, uint64_t step_seed, Tensor stats) {
  if (slice.count == 0) {
    model_->forward_without_examples();  // still take part in the gatherer's and reducer's collectives
    model_->backward_without_examples();
    return;
  }
  upload(slice, DataUse::training);
  Ctx ctx{backend_, true, step_seed, cross_replica_sum_ ? &cross_replica_sum_ : nullptr, tensor_};
  const Tensor out = model_->forward(ctx, images_.view());
  loss_.enqueue(out, labels_.view(), grad_scale, model_->output_grad(), stats);
  model_->backward(ctx);
}

void Replica::keep_state() {
  const Tensor state = model_->params().state();
  if (state.numel() == 0) return;
  if (kept_state_.empty()) kept_state_ = Buffer(backend_, state.shape);
  backend_.copy(state, kept_state_.view());
}

void Replica::restore_state() {
  if (!kept_state_.empty()) backend_.copy(kept_state_.view(), model_->params().state());
}

LossStats Replica::evaluate(const ReplicaSlice& slice) {
  if (slice.count == 0) {
    model_->forward_without_examples();
    return {};
  }
  upload(slice, DataUse::evaluation);
  Ctx ctx{backend_, false, 0, nullptr, tensor_};
  return loss_.compute(model_->forward(ctx, images_.view()), labels_.view(), 0.0f, Tensor{});
}

}  // namespace distrain
