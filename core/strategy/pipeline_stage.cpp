#include "core/strategy/pipeline_stage.hpp"

#include <chrono>

#include "core/backend/backend.hpp"
#include "core/base/rng.hpp"

namespace distrain {

namespace {

constexpr int kActivationTag = 11, kGradientTag = 12;

// A copy's trainable values and gradients: copy 0's storage, bound whole.
class SharedValues final : public ParamGatherer {
 public:
  explicit SharedValues(Tensor values) : values_(values) {}
  void attach(ParamArena& arena, const std::vector<Range>&) override { arena.bind_values(0, values_); }
  void gather(size_t) override {}
  void release(size_t) override {}
  void before_update() override {}
  void after_update() override {}
  Tensor own() const override { return values_; }
  int64_t bytes() const override { return 0; }
  bool collective() const override { return false; }

 private:
  Tensor values_;
};

class SharedGradients final : public GradientReducer {
 public:
  explicit SharedGradients(Tensor grads) : grads_(grads) {}
  void attach(ParamArena& arena, const std::vector<Range>&) override { arena.bind_grads(0, grads_); }
  void zero() override {}  // copy 0 zeroes the storage
  void open(size_t) override {}
  void reduce(size_t) override {}
  void flush() override {}
  Tensor own() const override { return grads_; }
  int64_t bytes() const override { return 0; }

 private:
  Tensor grads_;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PipelineStage::PipelineStage(const Recipe& recipe, Backend& backend, ModelSeams seams, Communicator* tensor,
                             const StagePlace& place)
    : backend_(backend), place_(place), tensor_(tensor), loss_(recipe.loss, backend) {
  const TensorGroup group = tensor ? TensorGroup{tensor->rank(), tensor->size()} : TensorGroup{};
  copies_.push_back(std::make_unique<Model>(recipe.model(), recipe.file, backend, std::move(seams), group, place.part));
  const ParamArena& p = copies_[0]->params();
  const int copies = micro_batches_in_flight(place.schedule, place.stage, place.stages, place.micro_batches);
  for (int c = 1; c < copies; ++c) {
    copies_.push_back(std::make_unique<Model>(
        recipe.model(), recipe.file, backend,
        ModelSeams{std::make_unique<SharedValues>(p.values()), std::make_unique<SharedGradients>(p.grads())}, group, place.part));
    copies_.back()->params().share_state(p.state());
  }
  slots_.resize(copies_.size());
  DT_USER_CHECK(!last() || copies_[0]->output_shape().rank() == 1,
                "{}: the model's output is {}; a classifier ends in (classes,), e.g. a dense layer", recipe.file,
                copies_[0]->output_shape().str());
}

// Micro-batches as equal as the count allows (fewer than asked when the slice is smaller).
std::vector<PipelineStage::Micro> PipelineStage::split(int64_t count) const {
  const int64_t m = std::min<int64_t>(place_.micro_batches, count);
  std::vector<Micro> micros;
  for (int64_t i = 0, offset = 0; i < m; ++i) {
    const int64_t c = count / m + (i < count % m ? 1 : 0);
    micros.push_back({offset, c});
    offset += c;
  }
  return micros;
}

template <typename F>
void PipelineStage::waiting(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  idle_s_ += seconds_since(t0);
}

LossStats PipelineStage::train(const ReplicaSlice& slice, float grad_scale, uint64_t seed) {
  const auto t0 = std::chrono::steady_clock::now();
  idle_s_ = 0;
  const std::vector<Micro> micros = split(slice.count);
  LossStats stats;
  for (const PipeOp& op : pipeline_ops(place_.schedule, place_.stage, place_.stages, static_cast<int>(micros.size()))) {
    if (op.forward)
      forward(op.micro, micros[static_cast<size_t>(op.micro)], slice, grad_scale, seed, stats);
    else
      backward(op.micro, seed);
  }
  if (place_.pipe)
    waiting([&] {
      for (Slot& s : slots_) place_.pipe->wait_send(s.act_send), place_.pipe->wait_send(s.grad_send);
    });
  step_s_ = seconds_since(t0);
  return stats;
}

// The micro-batch's input: its images on the first stage, the previous stage's output
// after it.
Tensor PipelineStage::input_of(Slot& slot, const Micro& m, const ReplicaSlice& slice, Model& copy) {
  const Shape shape = copy.input_shape().batched(m.count);
  if (slot.input.empty() || slot.input.shape() != shape) slot.input = Buffer(backend_, shape);
  if (place_.stage == 0) {
    const int64_t per = copy.input_shape().numel();
    backend_.upload(slice.images.data() + m.offset * per, slot.input.view());
  } else {
    waiting([&] { place_.pipe->recv(slot.input.view(), place_.stage - 1, kActivationTag, "the activations of a micro-batch"); });
  }
  return slot.input.view();
}

void PipelineStage::forward(int micro, const Micro& m, const ReplicaSlice& slice, float grad_scale, uint64_t seed,
                            LossStats& stats) {
  const auto c = static_cast<size_t>(micro) % copies_.size();
  Model& copy = *copies_[c];
  Slot& slot = slots_[c];
  const Tensor x = input_of(slot, m, slice, copy);
  // copy.forward() rewrites the copy's output and, for a micro-batch of another size (an
  // uneven split), reallocates its input gradient too: both of its sends must be done first.
  if (place_.pipe) waiting([&] { place_.pipe->wait_send(slot.act_send), place_.pipe->wait_send(slot.grad_send); });
  Ctx ctx{backend_, true, derive_seed(seed, static_cast<uint64_t>(micro)), nullptr, tensor_};
  const Tensor out = copy.forward(ctx, x);
  if (!last()) {
    slot.act_send = place_.pipe->start_send(out, place_.stage + 1, kActivationTag, "the activations of a micro-batch");
    return;
  }
  if (slot.labels.empty() || slot.labels.shape()[0] != m.count) slot.labels = Buffer(backend_, Shape{m.count}, DType::i32);
  backend_.upload(slice.labels.data() + m.offset, slot.labels.view());
  stats += loss_.compute(out, slot.labels.view(), grad_scale, copy.output_grad());
}

void PipelineStage::backward(int micro, uint64_t seed) {
  const auto c = static_cast<size_t>(micro) % copies_.size();
  Model& copy = *copies_[c];
  Slot& slot = slots_[c];
  if (!last())
    waiting([&] { place_.pipe->recv(copy.output_grad(), place_.stage + 1, kGradientTag, "the gradients of a micro-batch"); });
  if (place_.stage > 0) waiting([&] { place_.pipe->wait_send(slot.grad_send); });
  Ctx ctx{backend_, true, derive_seed(seed, static_cast<uint64_t>(micro)), nullptr, tensor_};
  copy.backward(ctx);
  if (place_.stage > 0)
    slot.grad_send = place_.pipe->start_send(copy.input_grad(), place_.stage - 1, kGradientTag, "the gradients of a micro-batch");
}

LossStats PipelineStage::evaluate(const ReplicaSlice& slice) {
  if (slice.count == 0) return {};
  Model& copy = *copies_[0];
  Slot& slot = slots_[0];
  const Tensor x = input_of(slot, Micro{0, slice.count}, slice, copy);
  if (place_.pipe) place_.pipe->wait_send(slot.act_send);
  Ctx ctx{backend_, false, 0, nullptr, tensor_};
  const Tensor out = copy.forward(ctx, x);
  if (!last()) {
    place_.pipe->wait_send(place_.pipe->start_send(out, place_.stage + 1, kActivationTag, "the activations of an evaluation batch"));
    return {};
  }
  if (slot.labels.empty() || slot.labels.shape()[0] != slice.count) slot.labels = Buffer(backend_, Shape{slice.count}, DType::i32);
  backend_.upload(slice.labels.data(), slot.labels.view());
  return loss_.compute(out, slot.labels.view(), 0.0f, Tensor{});
}

void PipelineStage::keep_state() {
  const Tensor state = model().params().state();
  if (state.numel() == 0) return;
  if (kept_state_.empty()) kept_state_ = Buffer(backend_, state.shape);
  backend_.copy(state, kept_state_.view());
}

void PipelineStage::restore_state() {
  if (!kept_state_.empty()) backend_.copy(kept_state_.view(), model().params().state());
}

int64_t stage_activation_bytes(const Model& stage_model, const StagePlace& place, int64_t n) {
  const int64_t micro = (n + place.micro_batches - 1) / place.micro_batches;
  const int64_t input =
      place.stage > 0 ? stage_model.input_shape().numel() * micro * static_cast<int64_t>(dtype_size(kActivationDType)) : 0;
  const int copies = micro_batches_in_flight(place.schedule, place.stage, place.stages, place.micro_batches);
  return copies * (stage_model.activation_bytes(micro) + input);
}

}  // namespace distrain
