#include "core/strategy/replica.hpp"

#include <chrono>
#include <limits>
#include <mutex>

#include "core/base/log.hpp"
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

// The slice's micro-batches, as equal as can be (the first ones one larger); some are
// empty when the slice has fewer examples than micro-batches.
std::vector<ReplicaSlice> micro_parts(const ReplicaSlice& slice, int micro_batches) {
  std::vector<ReplicaSlice> parts;
  for (int64_t i = 0, offset = 0; i < micro_batches; ++i) {
    const int64_t count = slice.count / micro_batches + (i < slice.count % micro_batches ? 1 : 0);
    parts.push_back(slice.part(offset, count));
    offset += count;
  }
  return parts;
}

// The whole model in one stage, a slice running as train.accumulate_steps micro-batches.
StagePlace whole_model(const Recipe& recipe) {
  StagePlace place;
  place.micro_batches = static_cast<int>(recipe.train.accumulate_steps);
  return place;
}

// Reallocates `buffer` unless it has this shape and type already.
void ensure(Buffer& buffer, Backend& backend, const Shape& shape, DType dtype) {
  if (buffer.empty() || buffer.shape() != shape || buffer.view().dtype != dtype) buffer = Buffer(backend, shape, dtype);
}

}  // namespace

std::string vocabulary_kept_whole(const Recipe& recipe) {
  if (!recipe.strategy.mesh.vocab_parallel.value_or(true)) return "strategy.vocab_parallel = false";
  if (recipe.loss.type != LossType::sparse_categorical_crossentropy || !recipe.loss.from_logits)
    return "the loss is not sparse cross-entropy from logits";
  return "";
}

TensorGroup tensor_group_of(const Recipe& recipe, int rank, int size) {
  const StrategySpec& s = recipe.strategy;
  const bool whole = !vocabulary_kept_whole(recipe).empty();
  DT_USER_CHECK(!whole || !s.mesh.vocab_parallel.value_or(false),
                "{}: strategy.vocab_parallel = true needs loss sparse_categorical_crossentropy from logits", recipe.file);
  VocabularySplit vocabulary = VocabularySplit::off;
  if (!whole) vocabulary = s.mesh.vocab_parallel ? VocabularySplit::required : VocabularySplit::where_possible;
  return TensorGroup{rank, size, s.mesh.sequence_parallel, vocabulary};
}

Replica::Replica(const Recipe& recipe, Backend& backend, ModelSeams seams, Communicator* tensor,
                 std::optional<StagePlace> place)
    : backend_(backend),
      place_(place.value_or(whole_model(recipe))),
      tensor_(tensor),
      loss_(recipe.loss, backend) {
  if (recipe.train.matmul_dtype == DType::bf16) {
    const std::string why_not = backend.bf16_matmul_unavailable();
    DT_USER_CHECK(why_not.empty(), "{}: train.precision = \"bf16\" on {}: {}", recipe.file, backend.device().str(), why_not);
    if (const std::string how = backend.bf16_matmul_emulated(); !how.empty()) {
      static std::once_flag told;  // once a process, not once a replica
      std::call_once(told, [&] { log::info("train.precision = \"bf16\" on {}: {}", backend.device().str(), how); });
    }
  }
  const TensorGroup group = tensor ? tensor_group_of(recipe, tensor->rank(), tensor->size()) : TensorGroup{};
  copies_.push_back(std::make_unique<Model>(recipe.model(), backend, std::move(seams), group, place_.part));
  const ParamArena& p = copies_[0]->params();
  const int copies = micro_batches_in_flight(place_.schedule, place_.stage, place_.stages, place_.micro_batches);
  for (int c = 1; c < copies; ++c) {
    std::unique_ptr<ParamGatherer> values = copies_[0]->gatherer().for_copy();
    if (!values) values = std::make_unique<SharedValues>(p.values());
    copies_.push_back(std::make_unique<Model>(
        recipe.model(), backend, ModelSeams{std::move(values), std::make_unique<SharedGradients>(p.grads())}, group,
        place_.part));
    copies_.back()->params().share_state(p.state());
    copies_.back()->share_parameter_copy(*copies_[0]);
  }
  for (auto& copy : copies_) {
    copy->set_recompute(recipe.train.recompute_blocks);
    copy->set_precision(recipe.train.matmul_dtype);
  }
  if (const std::optional<int64_t> first = copies_[0]->output_first_class()) loss_.set_class_slice(*tensor, *first);
  slots_.resize(copies_.size());
  if (place_.micro_batches > 1) micro_stats_ = Buffer(backend_, Shape{2});
  check_ends(recipe);
}

// The model's input suits the data (first stage) and its output the loss (last stage).
void Replica::check_ends(const Recipe& recipe) const {
  const bool tokens = recipe.data.token_data();
  const Model& m = *copies_[0];
  if (last())
    DT_USER_CHECK(m.output_shape().rank() == (tokens ? 2 : 1), "{}: the model's output is {}; {}", recipe.file,
                  m.output_shape().str(),
                  tokens ? "a language model ends in (sequence, vocabulary), e.g. a dense layer on the sequence"
                         : "a classifier ends in (classes,), e.g. a dense layer");
  if (first())
    DT_USER_CHECK(tokens == (m.input_dtype() == DType::i32), "{}: {}", recipe.file,
                  tokens ? "token data needs a model that starts with an embedding layer"
                         : "a model that starts with an embedding layer needs token data (data.dataset = \"text\" or "
                           "\"tokens\")");
}

template <typename F>
void Replica::waiting(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  idle_s_ += seconds_since(t0);
}

void Replica::wait_sends(Slot& slot) {
  if (place_.pipe) waiting([&] { place_.pipe->wait_send(slot.act_send), place_.pipe->wait_send(slot.grad_send); });
}

uint64_t Replica::micro_seed(uint64_t step_seed, int micro) const {
  return place_.micro_batches == 1 ? step_seed : derive_seed(step_seed, static_cast<uint64_t>(micro));
}

void Replica::forward_backward(const ReplicaSlice& slice, float grad_scale, uint64_t step_seed, Tensor stats) {
  const auto t0 = std::chrono::steady_clock::now();
  idle_s_ = 0;
  const int m = place_.micro_batches;
  // The loss writes `stats` itself only as the one micro-batch of a last stage.
  if (m > 1 || !last() || slice.count == 0) backend_.fill(stats, 0.0f);
  const std::vector<ReplicaSlice> parts = m > 1 ? micro_parts(slice, m) : std::vector<ReplicaSlice>{};
  for (const PipeOp& op : pipeline_ops(place_.schedule, place_.stage, place_.stages, m)) {
    const ReplicaSlice& part = m > 1 ? parts[static_cast<size_t>(op.micro)] : slice;
    if (op.forward)
      forward(op.micro, part, grad_scale, step_seed, stats);
    else
      backward(op.micro, part, step_seed);
  }
  for (Slot& s : slots_) wait_sends(s);
  step_s_ = seconds_since(t0);
}

void Replica::forward(int micro, const ReplicaSlice& part, float grad_scale, uint64_t seed, Tensor stats) {
  const auto c = static_cast<size_t>(micro) % copies_.size();
  Model& copy = *copies_[c];
  Slot& slot = slots_[c];
  if (part.count == 0) {
    copy.forward_without_examples();  // still take part in the gatherer's collectives
    return;
  }
  const Tensor x = input_of(slot, part, copy, DataUse::training);
  // copy.forward() rewrites the copy's output and, for a micro-batch of another size (an
  // uneven split), reallocates its input gradient too: both of its sends must be done first.
  wait_sends(slot);
  Ctx ctx{backend_, true, micro_seed(seed, micro), cross_replica_sum_ ? &cross_replica_sum_ : nullptr, tensor_, place_.pipe};
  const Tensor out = copy.forward(ctx, x);
  if (!last()) {
    slot.act_send = place_.pipe->start_send(out, place_.stage + 1, kActivationTag, "the activations of a micro-batch");
    return;
  }
  const bool whole = place_.micro_batches == 1;
  loss_.enqueue(out, slot.labels.view(), grad_scale, copy.output_grad(), whole ? stats : micro_stats_.view());
  if (!whole) backend_.axpby(1.0f, micro_stats_.view(), 1.0f, stats);
}

void Replica::backward(int micro, const ReplicaSlice& part, uint64_t seed) {
  const auto c = static_cast<size_t>(micro) % copies_.size();
  Model& copy = *copies_[c];
  Slot& slot = slots_[c];
  if (part.count == 0) {
    copy.backward_without_examples();  // and in the reducer's
    return;
  }
  if (!last())
    waiting([&] { place_.pipe->recv(copy.output_grad(), place_.stage + 1, kGradientTag, "the gradients of a micro-batch"); });
  if (!first()) waiting([&] { place_.pipe->wait_send(slot.grad_send); });
  Ctx ctx{backend_, true, micro_seed(seed, micro), cross_replica_sum_ ? &cross_replica_sum_ : nullptr, tensor_, place_.pipe};
  copy.backward(ctx);
  if (!first())
    slot.grad_send = place_.pipe->start_send(copy.input_grad(), place_.stage - 1, kGradientTag, "the gradients of a micro-batch");
}

Tensor Replica::input_of(Slot& slot, const ReplicaSlice& part, const Model& copy, DataUse use) {
  upload(slot, part, use);
  if (!first()) {
    ensure(slot.input, backend_, copy.input_shape().batched(part.count), kActivationDType);
    waiting([&] { place_.pipe->recv(slot.input.view(), place_.stage - 1, kActivationTag, "the activations of a micro-batch"); });
  }
  return slot.input.view();
}

// The micro-batch's data on this device: its input on the first stage, its labels on the last.
void Replica::upload(Slot& slot, const ReplicaSlice& part, DataUse use) {
  const Model& m = *copies_[0];
  const int64_t n = part.count;
  if (first()) ensure(slot.input, backend_, m.input_shape().batched(n), m.input_dtype());
  if (last()) ensure(slot.labels, backend_, Shape{static_cast<int64_t>(part.labels.size())}, DType::i32);
  if (!part.indices.empty()) {  // the dataset is on this device: only the indices travel
    const DeviceData* data = data_[static_cast<size_t>(use)].get();
    DT_CHECK(data && static_cast<int64_t>(part.indices.size()) == n && first() && last(),
             "a slice of {} indices for a replica {} the dataset on its device", part.indices.size(), data ? "with" : "without");
    for (int32_t i : part.indices)  // checked here, where they are at hand: a GPU gather would read anywhere
      DT_CHECK(i >= 0 && i < data->labels().numel(), "example {} of a dataset of {}", i, data->labels().numel());
    ensure(slot.rows, backend_, Shape{n}, DType::i32);
    backend_.upload(part.indices.data(), slot.rows.view());
    backend_.gather_examples(data->examples(), slot.rows.view(), slot.input.view());
    backend_.gather_examples(data->labels(), slot.rows.view(), slot.labels.view());
    return;
  }
  if (first()) {
    const bool tokens = m.input_dtype() == DType::i32;  // token windows: ids, and the next tokens as labels
    const size_t values = tokens ? part.tokens.size() : part.images.size();
    DT_CHECK(static_cast<int64_t>(values) == slot.input.view().numel(), "slice of {} {} for input {}", values,
             tokens ? "tokens" : "values", slot.input.shape().str());
    if (tokens)
      backend_.upload(part.tokens.data(), slot.input.view());
    else
      backend_.upload(part.images.data(), slot.input.view());
  }
  if (last()) backend_.upload(part.labels.data(), slot.labels.view());
}

LossStats Replica::evaluate(const ReplicaSlice& slice) {
  Model& copy = *copies_[0];
  if (slice.count == 0) {
    copy.forward_without_examples();
    return {};
  }
  Slot& slot = slots_[0];
  const Tensor x = input_of(slot, slice, copy, DataUse::evaluation);
  wait_sends(slot);
  Ctx ctx{backend_, false, 0, nullptr, tensor_};
  const Tensor out = copy.forward(ctx, x);
  if (!last()) {
    place_.pipe->wait_send(place_.pipe->start_send(out, place_.stage + 1, kActivationTag, "the activations of an evaluation batch"));
    return {};
  }
  return loss_.compute(out, slot.labels.view(), 0.0f, Tensor{});
}

void Replica::keep_state() {
  const Tensor state = model().params().state();
  if (state.numel() == 0) return;
  if (kept_state_.empty()) kept_state_ = Buffer(backend_, state.shape);
  backend_.copy(state, kept_state_.view());
}

void Replica::restore_state() {
  if (!kept_state_.empty()) backend_.copy(kept_state_.view(), model().params().state());
}

int64_t stage_activation_bytes(const Model& stage_model, const StagePlace& place, int64_t n) {
  const int64_t micro = (n + place.micro_batches - 1) / place.micro_batches;
  const int64_t input =
      place.stage > 0 ? stage_model.input_shape().numel() * micro * static_cast<int64_t>(dtype_size(kActivationDType)) : 0;
  const int copies = micro_batches_in_flight(place.schedule, place.stage, place.stages, place.micro_batches);
  const Shape& out = stage_model.output_shape();  // the loss's row sums over class slices, for the largest micro-batch
  const int64_t loss = stage_model.output_first_class() ? Loss::class_slice_bytes(micro * out.numel() / out[out.rank() - 1]) : 0;
  const int64_t transient = stage_model.transient_bytes(micro);  // one copy runs at a time
  int64_t bytes = 0;
  if (__builtin_mul_overflow(stage_model.activation_bytes(micro) - transient + input, copies, &bytes) ||
      __builtin_add_overflow(bytes, transient + loss, &bytes))
    return std::numeric_limits<int64_t>::max();
  return bytes;
}

}  // namespace distrain
