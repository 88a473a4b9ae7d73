#include "core/model/model.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "core/base/json.hpp"
#include "core/layers/registry.hpp"
#include "core/layers/sequence_shard.hpp"
#include "core/layers/tensor_gather.hpp"
#include "core/model/tensor_plan.hpp"

namespace distrain {

Model::Model(const ModelSpec& spec, Backend& backend, ModelSeams seams, TensorGroup tensor, ModelPart part)
    : backend_(backend),
      input_shape_(spec.input_shape),
      input_dtype_(spec.input_dtype),
      gatherer_(seams.gatherer ? std::move(seams.gatherer) : std::make_unique<FullValues>()),
      reducer_(seams.reducer ? std::move(seams.reducer) : std::make_unique<FullGradients>()) {
  std::vector<size_t> origin;  // each layer's index in the spec, for messages
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    layers_.push_back(copy_layer(*spec.layers[i].prototype));
    inputs_.push_back(spec.layers[i].inputs);
    origin.push_back(i);
  }
  place_on_tensor_axis(tensor, spec, origin);
  for (const size_t o : origin) block_.push_back(spec.layers[o].block);
  part_ = part;
  input_grad_wanted_ = part.input_grad;
  setup_layers(spec, origin);
  keep_part(part, spec.file);
  {
    static const std::string kPurpose = "the model's variables and their gradients";
    const MemoryPurpose purpose(kPurpose);
    arena_.allocate(backend_);
    tie_layers();
  }
  find_trainable_ranges();
  plan_gradients();
  plan_precision();
  gatherer_->attach(arena_, ranges_);
  reducer_->attach(arena_, ranges_);
}

bool Model::is_chain() const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i] != std::vector<int>{static_cast<int>(i) - 1}) return false;
  return true;
}

// Splits layers over the tensor axis as plan_tensor_parallel says, inserting a
// tensor_gather after each split output the next layer needs whole, and with sequence
// parallelism the sequence_scatter and sequence_gather layers; each reader then reads
// the form it takes (a shard or the whole sequence).
void Model::place_on_tensor_axis(const TensorGroup& tensor, const ModelSpec& spec, std::vector<size_t>& origin) {
  if (tensor.size == 1) return;
  const TensorPlan plan = plan_tensor_parallel(layers_, inputs_, tensor.size, tensor.sequence, tensor.vocabulary, spec.file);
  if (plan.vocabulary)
    output_first_class_ = slice_begin(layers_.back()->settings().value("units", int64_t{0}), tensor.rank, tensor.size);
  std::vector<std::unique_ptr<Layer>> placed;
  std::vector<std::vector<int>> placed_inputs;
  std::vector<size_t> placed_origin;
  // Where each layer's output is read after placement, as it is and (where it differs)
  // as a sequence shard and whole; index 0 of each stands for the model's input.
  std::vector<int> as_is(layers_.size() + 1, -1), as_shard(layers_.size() + 1, -1), as_whole(layers_.size() + 1, -1);
  const TensorPlace base{TensorSplit::none, tensor.rank, tensor.size};
  int gathers = 0;
  auto add = [&](std::unique_ptr<Layer> layer, std::vector<int> in, size_t from) {
    placed.push_back(std::move(layer));
    placed_inputs.push_back(std::move(in));
    placed_origin.push_back(from);  // errors name the layer a gather or scatter works for
    return static_cast<int>(placed.size()) - 1;
  };
  if (plan.scatter_input) {
    as_shard[0] = add(make_sequence_scatter(base), {-1}, 0);
    placed.back()->set_name("sequence_scatter_input");
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    const TensorPlanEntry& e = plan.layers[i];
    const bool by_vocabulary = plan.vocabulary && (i + 1 == layers_.size() || layers_[i]->type() == "embedding");
    if (e.split != TensorSplit::none || e.sequence)
      layers_[i]->set_tensor_place(TensorPlace{e.split, tensor.rank, tensor.size, e.sequence, by_vocabulary});
    const bool shard = reads_sequence_shard(layers_[i]->tensor_place());
    std::vector<int> in;
    for (const int j : inputs_[i]) {
      const auto k = static_cast<size_t>(j + 1);
      const int form = shard ? as_shard[k] : as_whole[k];
      in.push_back(form != -1 ? form : as_is[k]);
    }
    const std::string name = layers_[i]->name();
    int at = add(std::move(layers_[i]), std::move(in), origin[i]);
    if (e.gather_after) {
      at = add(make_tensor_gather(base), {at}, origin[i]);
      placed.back()->set_name(fmt::format("tensor_gather_{}", ++gathers));
    }
    as_is[i + 1] = at;
    if (e.scatter_sequence_after) {
      as_shard[i + 1] = add(make_sequence_scatter(base), {at}, origin[i]);
      placed.back()->set_name(name + "_sequence_scatter");
    }
    if (e.gather_sequence_after) {
      as_whole[i + 1] = add(make_sequence_gather(base), {at}, origin[i]);
      placed.back()->set_name(name + "_sequence_gather");
    }
  }
  layers_ = std::move(placed);
  inputs_ = std::move(placed_inputs);
  origin = std::move(placed_origin);
}

// Each layer's setup declares its variables (in this model's arena when the layer is in
// its part, else in one thrown away) and gives its output shape. A layer tied to a layer
// on the other side of the part's edge (a pipeline's last stage's head and the first's
// embedding) gets a copy of that layer's variables, declared by a copy of that layer just
// before its own.
void Model::setup_layers(const ModelSpec& spec, const std::vector<size_t>& origin) {
  ParamArena elsewhere;
  std::vector<std::vector<Shape>> in(layers_.size());
  auto here = [&](size_t i) { return i >= part_.first && i < part_.end; };
  for (size_t i = 0; i < layers_.size(); ++i) {
    for (const int j : inputs_[i]) in[i].push_back(j < 0 ? input_shape_ : shapes_[static_cast<size_t>(j)]);
    ParamArena& arena = here(i) ? arena_ : elsewhere;
    for (size_t o = 0; o < i; ++o)
      if (layers_[o]->name() == layers_[i]->tied_layer() && here(o) != here(i))
        infer_output_shape(spec, origin[o], *copy_layer(*layers_[o]), in[o], arena);
    shapes_.push_back(infer_output_shape(spec, origin[i], *layers_[i], in[i], arena));
  }
}

bool Model::can_cut_before(size_t first) const {
  if (first == 0 || first >= layers_.size()) return first == 0;
  for (size_t k = first; k < layers_.size(); ++k)
    for (const int j : inputs_[k])
      if (j < static_cast<int>(first) - 1) return false;
  return true;
}

void Model::keep_part(const ModelPart& part, const std::string& file) {
  const size_t end = std::min(part.end, layers_.size());
  DT_USER_CHECK(part.first < end, "{}: a pipeline stage of layers [{}, {}) of {} has no layer", file, part.first, part.end,
                layers_.size());
  if (part.first == 0 && end == layers_.size()) return;
  if (end < layers_.size()) {  // a stage before the head
    output_first_class_.reset();
    output_is_logits_ = false;
  }
  DT_USER_CHECK(can_cut_before(part.first) && (end == layers_.size() || can_cut_before(end)),
                "{}: a pipeline stage of layers [{}, {}) is read past its ends by more than the layer before it", file,
                part.first, end);
  if (part.first > 0) {  // a later stage's input is the activations before it
    input_shape_ = shapes_[part.first - 1];
    input_dtype_ = kActivationDType;
  }
  layers_.erase(layers_.begin() + static_cast<int64_t>(end), layers_.end());
  layers_.erase(layers_.begin(), layers_.begin() + static_cast<int64_t>(part.first));
  shapes_.erase(shapes_.begin() + static_cast<int64_t>(end), shapes_.end());
  shapes_.erase(shapes_.begin(), shapes_.begin() + static_cast<int64_t>(part.first));
  block_.erase(block_.begin() + static_cast<int64_t>(end), block_.end());
  block_.erase(block_.begin(), block_.begin() + static_cast<int64_t>(part.first));
  inputs_.erase(inputs_.begin() + static_cast<int64_t>(end), inputs_.end());
  inputs_.erase(inputs_.begin(), inputs_.begin() + static_cast<int64_t>(part.first));
  for (std::vector<int>& in : inputs_)  // the layer before the stage is its input now
    for (int& j : in) j = std::max(-1, j - static_cast<int>(part.first));
}

void Model::tie_layers() {
  ties_.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    const std::optional<int> variable = layers_[i]->tied_variable();
    if (!variable) continue;
    const Variable& v = arena_.variables().at(static_cast<size_t>(*variable));
    size_t owner = 0;
    while (owner < i && layers_[owner]->name() != v.layer) ++owner;
    ties_[i] = Tie{owner < i ? owner : kElsewhere, *variable, Buffer()};
  }
}

// A variable belongs to its layer; a copy kept for a layer tied to another stage's, to it.
void Model::find_trainable_ranges() {
  first_trainable_ = layers_.size();
  ranges_.assign(layers_.size(), Range{});
  for (size_t id = 0; id < arena_.variables().size(); ++id)
    if (const Variable& v = arena_.variables()[id]; v.trainable)
      for (size_t i = 0; i < layers_.size(); ++i)
        if (layers_[i]->name() == v.layer ||
            (ties_[i] && ties_[i]->owner == kElsewhere && ties_[i]->variable == static_cast<int>(id))) {
          first_trainable_ = std::min(first_trainable_, i);
          auto& [lo, hi] = ranges_[i];
          lo = hi == 0 ? v.offset : std::min(lo, v.offset);  // a layer's variables are declared together
          hi = std::max(hi, v.offset + v.shape.numel());
        }
}

// Per layer its output and what it keeps, the gradients' slots; the scratch of a graph's
// second readers (two of the largest output), the input's gradient, and the largest
// layer's transient buffers.
int64_t Model::activation_bytes(int64_t n) const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const auto element = static_cast<int64_t>(dtype_size(kActivationDType));
  const int64_t transient = transient_bytes(n);
  int64_t bytes = 0;
  std::vector<int64_t> per_block(blocks_.size(), 0);  // recomputation: one block's at a time
  for (size_t i = 0; i < shapes_.size(); ++i) {
    int64_t layer = 0;
    const auto kept = static_cast<int64_t>(dtype_size(kept_in_bf16(i) ? DType::bf16 : kActivationDType));
    if (__builtin_mul_overflow(shapes_[i].numel(), n, &layer) || __builtin_mul_overflow(layer, kept, &layer) ||
        __builtin_add_overflow(layer, layers_[i]->workspace_bytes(n), &layer))
      return kMax;
    int64_t& into = made_per_block(i) ? per_block[static_cast<size_t>(block_[i])] : bytes;
    if (__builtin_add_overflow(into, layer, &into)) return kMax;
  }
  if (!per_block.empty() && __builtin_add_overflow(bytes, *std::max_element(per_block.begin(), per_block.end()), &bytes))
    return kMax;
  int64_t extra = 0;  // kept within bounds by the layers' above
  const int64_t per_example = grad_plan_.total_elements() + copy_plan_.total_elements() + 2 * scratch_elements() +
                              (input_grad_wanted_ ? input_shape_.numel() : 0);
  if (__builtin_mul_overflow(per_example, n * element, &extra) || __builtin_add_overflow(bytes, extra, &bytes) ||
      __builtin_add_overflow(bytes, transient, &bytes))
    return kMax;
  return bytes;
}

int64_t Model::transient_bytes(int64_t n) const {
  int64_t largest = 0;
  for (const auto& layer : layers_) largest = std::max(largest, layer->transient_bytes(n));
  return largest;
}

// A graph's scratch per example: the largest output (or input) a second reader's gradient
// may need; a chain needs none.
int64_t Model::scratch_elements() const {
  if (is_chain()) return 0;
  int64_t largest = input_shape_.numel();
  for (const Shape& s : shapes_) largest = std::max(largest, s.numel());
  return largest;
}

// With the first batch: a model that never trains (checkpoints' layout) holds none.
void Model::make_tied_gradients() {
  static const std::string kPurpose = "the tied layers' gradients";
  const MemoryPurpose purpose(kPurpose);
  for (size_t i = 0; i < ties_.size(); ++i)
    if (ties_[i] && ties_[i]->grad.empty()) {
      ties_[i]->grad = Buffer(backend_, arena_.variables().at(static_cast<size_t>(ties_[i]->variable)).shape);
      layers_[i]->set_tied_grad(ties_[i]->grad.view());
    }
}

int64_t Model::tied_gradient_bytes() const {
  int64_t bytes = 0;
  for (const std::optional<Tie>& tie : ties_)
    if (tie)
      bytes += arena_.variables().at(static_cast<size_t>(tie->variable)).shape.numel() *
               static_cast<int64_t>(dtype_size(ParamArena::kDType));
  return bytes;
}

void Model::ensure_activations(int64_t n) {
  if (n == batch_) return;
  make_tied_gradients();
  activation_purpose_ = fmt::format("the activations of a batch of {} and their gradients", n);
  const MemoryPurpose purpose(activation_purpose_);
  acts_.clear();
  grad_slots_.clear();
  copy_slots_.clear();
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const bool kept = !made_per_block(i);
    const DType dtype = kept_in_bf16(i) ? DType::bf16 : kActivationDType;
    acts_.push_back(kept ? Buffer(backend_, shapes_[i].batched(n), dtype) : Buffer());
  }
  for (const int64_t elements : grad_plan_.elements) grad_slots_.emplace_back(backend_, Shape{n * elements});
  for (const int64_t elements : copy_plan_.elements) copy_slots_.emplace_back(backend_, Shape{n * elements});
  if (input_grad_wanted_) input_grad_ = Buffer(backend_, input_shape_.batched(n));

  scratch_.clear();
  if (const int64_t largest = scratch_elements())  // at most two inputs of a layer add into gradients already written
    for (int k = 0; k < 2; ++k) scratch_.emplace_back(backend_, Shape{n * largest});
  batch_ = n;
}

Tensor Model::grad_of(size_t i) const {
  const int slot = grad_plan_.slot.at(i);
  DT_CHECK(slot >= 0 && batch_ >= 0, "layer {}'s output gradient before a batch planned it", i);
  const Shape shape = shapes_[i].batched(batch_);
  return grad_slots_[static_cast<size_t>(slot)].view().range(0, shape.numel()).reshaped(shape);
}

void Model::plan_gradients() {
  std::vector<int64_t> elements;
  for (const Shape& s : shapes_) elements.push_back(s.numel());
  grad_plan_ = plan_gradient_slots(elements, inputs_, backward_end());
}

// A tied layer computes with its owner's variable too: gathered around it as its own.
void Model::gather(size_t i) {
  const bool tied = ties_[i] && ties_[i]->owner != kElsewhere;
  if (tied) gatherer_->gather(ties_[i]->owner);
  gatherer_->gather(i);
  if (rounds_parameters(i)) round_parameters(read_range(i));
}

// A tied head has no variables of its own (dense refuses a bias with tied_to): it reads
// its owner's.
Range Model::read_range(size_t i) const {
  if (!ties_[i] || ties_[i]->owner == kElsewhere || ranges_[ties_[i]->owner].empty()) return ranges_[i];
  DT_CHECK(ranges_[i].empty(), "tied layer '{}' has variables of its own", layers_[i]->name());
  return ranges_[ties_[i]->owner];
}

bool Model::output_rounded(size_t i) const {
  return precision_ == DType::bf16 && (i + 1 < layers_.size() || !output_is_logits_);
}

// Under bf16, unless the layer's reads round them anyway (Layer::reads_parameters_rounded).
bool Model::rounds_parameters(size_t i) const {
  return precision_ == DType::bf16 && !layers_[i]->reads_parameters_rounded(output_rounded(i));
}

void Model::release(size_t i) {
  gatherer_->release(i);
  if (ties_[i] && ties_[i]->owner != kElsewhere) gatherer_->release(ties_[i]->owner);
  if (!unrounded_.empty()) arena_.bind_values(0, std::exchange(unrounded_, Tensor{}));
}

// Nothing to do where the gatherer bound a rounded copy (zero, shard_optimizer); else the whole
// float32 values stay as they are and a rounded copy of the range is bound in their place
// until release.
void Model::round_parameters(Range r) {
  if (r.empty()) return;
  if (gatherer_->binding() == Binding::rounded_copy) return;
  Buffer& copy = parameter_copy_owner_->parameter_copy_;
  if (copy.empty()) {
    static const std::string kPurpose = "a layer's parameters rounded to bf16";
    const MemoryPurpose purpose(kPurpose);
    copy = Buffer(backend_, Shape{largest_rounded_range()});
  }
  unrounded_ = arena_.values();
  DT_CHECK(!unrounded_.empty(), "under bf16 a gatherer binds a rounded copy or the whole values");
  const Tensor rounded = copy.view().range(0, r.size());
  backend_.rounded_bf16(unrounded_.range(r.begin, r.size()), rounded);
  arena_.bind_values(r.begin, rounded);
}

int64_t Model::largest_rounded_range() const {
  int64_t largest = 0;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (rounds_parameters(i)) largest = std::max(largest, read_range(i).size());
  return largest;
}

int64_t Model::parameter_copy_bytes() const {
  if (gatherer_->binding() != Binding::values || parameter_copy_owner_ != this) return 0;
  return largest_rounded_range() * static_cast<int64_t>(dtype_size(ParamArena::kDType));
}

std::vector<Tensor> Model::layer_input_values(size_t i, bool read) {
  std::vector<Tensor> in;
  for (const int j : inputs_[i]) {
    if (!read)
      in.push_back(shape_of(j));
    else
      in.push_back(reads_kept_bf16(i, j) ? acts_[static_cast<size_t>(j)].view() : value_of(j));
  }
  return in;
}

bool Model::reads_kept_bf16(size_t i, int j) const {
  return j >= 0 && kept_in_bf16(static_cast<size_t>(j)) && layers_[i]->reads_inputs_as_products();
}

Tensor Model::shape_of(int j) const {
  const Shape shape = j < 0 ? input_.shape : shapes_[static_cast<size_t>(j)].batched(batch_);
  return Tensor{nullptr, shape, j < 0 ? input_.dtype : kActivationDType, backend_.device()};
}

bool Model::kept_in_bf16(size_t i) const {
  return precision_ == DType::bf16 && i + 1 < layers_.size() && !made_per_block(i);
}

void Model::plan_precision() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->set_matmul_dtype(precision_);
    layers_[i]->set_workspace_dtype(precision_ == DType::bf16 && !made_per_block(i) ? DType::bf16 : DType::f32);
  }
  std::vector<int64_t> elements;
  for (const Shape& s : shapes_) elements.push_back(s.numel());
  // Layer i's step: its inputs kept in bf16 (but those it reads in bf16 as they are), and
  // its output, which forward writes and backward reads.
  auto step = [&](size_t i, bool forward) {
    PassStep s;
    if (forward || layers_[i]->backward_reads_inputs())
      for (const int j : inputs_[i])
        if (j >= 0 && kept_in_bf16(static_cast<size_t>(j)) && !reads_kept_bf16(i, j)) s.reads.push_back(j);
    if (kept_in_bf16(i) && forward) s.writes = static_cast<int>(i);
    if (kept_in_bf16(i) && !forward && layers_[i]->backward_reads_output()) s.reads.push_back(static_cast<int>(i));
    return s;
  };
  std::vector<PassStep> forward, backward;
  for (size_t i = 0; i < layers_.size(); ++i) forward.push_back(step(i, true));
  for (size_t i = layers_.size(); i-- > backward_end();) {
    const int b = recompute_ ? block_[i] : -1;
    if (b >= 0 && i == blocks_[static_cast<size_t>(b)].last)  // recompute_block's reruns
      for (size_t k = blocks_[static_cast<size_t>(b)].first; k < i; ++k)
        if (inner_[k]) backward.push_back(step(k, true));
    backward.push_back(step(i, false));
  }
  copy_plan_ = plan_activation_slots(elements, forward, backward);
}

void Model::begin_pass(const std::vector<int>& slots) {
  pass_slots_ = &slots;
  copied_.assign(layers_.size(), false);
}

Tensor Model::value_of(int j) {
  if (j < 0) return input_;
  const auto u = static_cast<size_t>(j);
  if (!kept_in_bf16(u)) return acts_[u].view();
  const int slot = pass_slots_->at(u);
  DT_CHECK(slot >= 0, "layer {}'s output read where no float32 copy was planned", u);
  const Shape shape = shapes_[u].batched(batch_);
  const Tensor copy = copy_slots_[static_cast<size_t>(slot)].view().range(0, shape.numel()).reshaped(shape);
  if (!copied_[u]) backend_.from_bf16(acts_[u].view(), copy);
  copied_[u] = true;
  return copy;
}

Tensor Model::output_for_write(size_t i) {
  if (!kept_in_bf16(i)) return acts_[i].view();
  copied_[i] = true;  // forward writes the copy, then keeps it in bf16
  return value_of(static_cast<int>(i));
}

// Where layer i's backward writes its input gradients: an input's own gradient for its
// first consumer in backward order, a scratch buffer for the others (add_into[k]: where the
// scratch of slot k is added after, empty for none); nothing below `last`, where no layer
// needs a gradient. Slot `layers` of `written` stands for the model's input.
std::vector<Tensor> Model::layer_input_grads(size_t i, size_t last, std::vector<bool>& written, std::vector<Tensor>& add_into) {
  std::vector<Tensor> din;
  add_into.assign(inputs_[i].size(), Tensor{});
  size_t scratch = 0;
  for (size_t k = 0; k < inputs_[i].size(); ++k) {
    const int j = inputs_[i][k];
    const size_t u = j < 0 ? layers_.size() : static_cast<size_t>(j);
    if ((j < 0 && !input_grad_wanted_) || (j >= 0 && u < last)) {
      din.push_back(Tensor{});
      continue;
    }
    const Tensor into = j < 0 ? input_grad_.view() : grad_of(u);
    if (!written[u]) {
      written[u] = true;
      din.push_back(into);
    } else {
      din.push_back(scratch_.at(scratch++).view().range(0, into.numel()).reshaped(into.shape));
      add_into[k] = into;
    }
  }
  return din;
}

bool Model::makes_input_gradient(size_t i) const {
  const size_t last = backward_end();
  return std::any_of(inputs_[i].begin(), inputs_[i].end(), [&](int j) {
    return j < 0 ? input_grad_wanted_ : static_cast<size_t>(j) >= last;
  });
}

Tensor Model::forward(Ctx& ctx, const Tensor& x) {
  DT_CHECK(x.shape.rank() == input_shape_.rank() + 1, "model input {} for input_shape {}", x.shape.str(),
           input_shape_.str());
  ensure_activations(x.shape[0]);
  input_ = x;
  begin_pass(copy_plan_.forward);
  const MemoryPurpose purpose(activation_purpose_);  // what layers keep for backward
  for (size_t i = 0; i < layers_.size(); ++i) {
    const int b = block_[i];
    if (recompute_ && b >= 0 && i == blocks_[static_cast<size_t>(b)].first) allocate_inner(b, batch_);
    run_forward(ctx, i, true);
    if (recompute_ && b >= 0 && i == blocks_[static_cast<size_t>(b)].last) release_inner(b);
  }
  return acts_.back().view();
}

void Model::run_forward(Ctx& ctx, size_t i, bool timed) {
  gather(i);
  if (clock_ && timed) clock_->start();
  const Tensor out = output_for_write(i);
  // What later layers read is what backward reads: rounded, by the layer's last op where
  // it can, else here.
  const OutputRounding rounding{output_rounded(i), kept_in_bf16(i) ? acts_[i].view() : Tensor{}};
  const bool layer_rounds = rounding.round && layers_[i]->rounds_output();
  if (layer_rounds) ctx.output_rounding = rounding;
  layers_[i]->forward_inputs(ctx, layer_input_values(i, true), out);
  ctx.output_rounding = {};
  if (rounding.round && !layer_rounds) backend_.to_bf16(out, rounding.packed);
  if (clock_ && timed) clock_->stop_forward(i);
  release(i);
  if (ctx.messages) ctx.messages->progress();
}

void Model::set_precision(DType precision) {
  precision_ = precision;
  plan_precision();
  batch_ = -1;  // the buffers are made again
}

void Model::set_recompute(bool on) {
  recompute_ = on;
  batch_ = -1;  // the buffers are made again
  if (!on) {
    plan_precision();
    return;
  }
  const std::vector<std::vector<size_t>> readers = readers_of(inputs_);
  blocks_.clear();
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (block_[i] < 0) continue;
    DT_USER_CHECK(layers_[i]->type() != "batch_norm", "train.recompute = \"blocks\": layer '{}' (batch_norm) in a repeat block "
                  "updates its moving statistics in forward, which a rerun would do twice; use \"none\"", layers_[i]->name());
    if (blocks_.size() <= static_cast<size_t>(block_[i])) blocks_.resize(static_cast<size_t>(block_[i]) + 1);
    BlockSpan& s = blocks_[static_cast<size_t>(block_[i])];
    s.first = std::min(s.first, i);
    s.last = std::max(s.last, i);
  }
  inner_.assign(layers_.size(), false);
  for (size_t i = 0; i + 1 < layers_.size(); ++i) {
    const int b = block_[i];
    if (b < 0 || i == blocks_[static_cast<size_t>(b)].last) continue;
    inner_[i] = std::all_of(readers[i].begin(), readers[i].end(), [&](size_t r) { return block_[r] == b; });
  }
  plan_precision();
}

void Model::allocate_inner(int b, int64_t n) {
  const MemoryPurpose purpose(activation_purpose_);
  const BlockSpan& s = blocks_[static_cast<size_t>(b)];
  for (size_t i = s.first; i <= s.last; ++i) {
    if (!inner_[i]) continue;
    if (acts_[i].empty()) acts_[i] = Buffer(backend_, shapes_[i].batched(n));
  }
}

void Model::release_inner(int b) {
  const BlockSpan& s = blocks_[static_cast<size_t>(b)];
  for (size_t i = s.first; i <= s.last; ++i) {
    if (!inner_[i]) continue;
    acts_[i] = Buffer();
    layers_[i]->release_workspace();
  }
}

void Model::recompute_block(Ctx& ctx, int b) {
  allocate_inner(b, batch_);
  const MemoryPurpose purpose(activation_purpose_);
  const BlockSpan& s = blocks_[static_cast<size_t>(b)];
  for (size_t i = s.first; i < s.last; ++i)
    if (inner_[i]) run_forward(ctx, i, false);
}

void Model::backward(Ctx& ctx) {
  const size_t last = backward_end();
  begin_pass(copy_plan_.backward);
  std::vector<bool> written(layers_.size() + 1, false);
  std::vector<Tensor> add_into;
  for (size_t i = layers_.size(); i-- > last;) {
    const int b = recompute_ ? block_[i] : -1;
    if (b >= 0 && i == blocks_[static_cast<size_t>(b)].last) recompute_block(ctx, b);
    const std::vector<Tensor> din = layer_input_grads(i, last, written, add_into);
    gather(i);
    reducer_->open(i);
    if (clock_) clock_->start();
    const Layer& l = *layers_[i];
    const auto self = static_cast<int>(i);
    layers_[i]->backward_inputs(ctx, layer_input_values(i, l.backward_reads_inputs()),
                                l.backward_reads_output() ? value_of(self) : shape_of(self), grad_of(i), din);
    if (clock_) clock_->stop_backward(i);
    for (size_t k = 0; k < din.size(); ++k)
      if (!add_into[k].empty()) backend_.axpby(1.0f, din[k], 1.0f, add_into[k]);
    for (size_t t = 0; t < ties_.size(); ++t)  // the tied layers' share of layer i's variables (or its copy's)
      if (ties_[t] && (ties_[t]->owner == i || (t == i && ties_[t]->owner == kElsewhere)))
        backend_.axpby(1.0f, ties_[t]->grad.view(), 1.0f, arena_.grad(ties_[t]->variable));
    release(i);
    reducer_->reduce(i);
    if (ctx.messages) ctx.messages->progress();
    if (b >= 0 && i == blocks_[static_cast<size_t>(b)].first) release_inner(b);
  }
}

void Model::sum_sequence_shard_gradients(Communicator& tensor) {
  for (size_t i = 0; i < layers_.size(); ++i) {
    const TensorPlace& p = layers_[i]->tensor_place();
    if (p.sequence && p.split == TensorSplit::none && !ranges_[i].empty())
      tensor.all_reduce(arena_.grads().range(ranges_[i].begin, ranges_[i].size()), ReduceOp::sum);
  }
}

void Model::forward_without_examples() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    gather(i);
    release(i);
  }
}

void Model::backward_without_examples() {
  for (size_t i = layers_.size(); i-- > backward_end();) {
    gather(i);
    reducer_->open(i);
    release(i);
    reducer_->reduce(i);
  }
}

std::string Model::summary() const {
  std::map<std::string, int64_t> counts;
  for (const Variable& v : arena_.variables()) counts[v.layer] += v.shape.numel();
  size_t width = 22;  // the name column: as wide as the longest name (HF names run long)
  for (const auto& l : layers_) width = std::max(width, l->name().size());
  const auto row = [&](const std::string& name, const std::string& type, const std::string& output, const std::string& params) {
    return fmt::format("{:<{}} {:<18} {:<16} {:>10}\n", name, width, type, output, params);
  };
  std::string s = row("layer", "type", "output", "params") + row("(input)", "", input_shape_.str(), "");
  for (size_t i = 0; i < layers_.size(); ++i)
    s += row(layers_[i]->name(), layers_[i]->type(), shapes_[i].str(), std::to_string(counts[layers_[i]->name()]));
  s += fmt::format("trainable parameters: {}", arena_.trainable_elements());
  return s;
}

}  // namespace distrain
