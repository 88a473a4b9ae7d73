#include "core/model/model.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/base/config_table.hpp"
#include "core/layers/registry.hpp"
#include "core/layers/tensor_gather.hpp"
#include "core/model/tensor_plan.hpp"

namespace distrain {

namespace {
// The element count, or INT64_MAX where it overflows (then above any limit).
int64_t checked_numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (const int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  return n;
}
}  // namespace

Model::Model(const toml::table& model, const std::string& file, Backend& backend, ModelSeams seams, TensorGroup tensor,
             ModelPart part)
    : backend_(backend),
      gatherer_(seams.gatherer ? std::move(seams.gatherer) : std::make_unique<FullValues>()),
      reducer_(seams.reducer ? std::move(seams.reducer) : std::make_unique<FullGradients>()) {
  ConfigTable config(model, file, "model.");
  std::vector<int64_t> dims = config.get_int_list("input_shape");
  if (dims.empty() || std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d <= 0; }))
    config.fail("input_shape", "expected an array of positive integers such as [28, 28, 1]");
  if (checked_numel(dims) > kMaxExtent)
    config.fail("input_shape", fmt::format("more than {} elements per example", kMaxExtent));
  input_shape_ = Shape(std::move(dims));
  const toml::node* layers = config.raw("layers");
  const toml::array* list = layers ? layers->as_array() : nullptr;
  if (!list || list->empty()) config.fail("layers", "missing or empty: add [[model.layers]] tables");
  config.finish();
  std::vector<LayerSource> sources = create_layers(*list, file);
  place_on_tensor_axis(tensor, file, sources);
  part_ = part;
  input_grad_wanted_ = part.input_grad;
  setup_layers(file, sources);
  keep_part(part, file);
  arena_.allocate(backend_);
  find_trainable_ranges();
  gatherer_->attach(arena_, ranges_);
  reducer_->attach(arena_, ranges_);
}

// The recipe's layers, named (type_k unless named); returns where each one came from.
std::vector<Model::LayerSource> Model::create_layers(const toml::array& list, const std::string& file) {
  std::map<std::string, int> per_type;
  std::set<std::string> names;
  std::vector<LayerSource> sources;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = fmt::format("model.layers[{}]", i);
    const toml::table* t = list[i].as_table();
    DT_USER_CHECK(t, "{}: {}: expected a table", file, key);
    ConfigTable layer_config(*t, file, key + ".");
    auto layer = create_layer(layer_config);
    const int k = ++per_type[layer->type()];
    if (layer->name().empty()) layer->set_name(fmt::format("{}_{}", layer->type(), k));
    if (!names.insert(layer->name()).second) layer_config.fail("name", fmt::format("layer name '{}' is used twice", layer->name()));
    layer->set_index(static_cast<int>(i));
    layers_.push_back(std::move(layer));
    sources.push_back(LayerSource{t, key});
  }
  return sources;
}

// Splits layers over the tensor axis as plan_tensor_parallel says, inserting a
// tensor_gather after each split output the next layer needs whole.
void Model::place_on_tensor_axis(const TensorGroup& tensor, const std::string& file, std::vector<LayerSource>& sources) {
  const std::vector<TensorPlanEntry> plan = plan_tensor_parallel(layers_, tensor.size, file);
  std::vector<std::unique_ptr<Layer>> placed;
  std::vector<LayerSource> placed_sources;
  int gathers = 0;
  for (size_t i = 0; i < layers_.size(); ++i) {
    if (plan[i].split != TensorSplit::none) layers_[i]->set_tensor_place(TensorPlace{plan[i].split, tensor.rank, tensor.size});
    placed.push_back(std::move(layers_[i]));
    placed_sources.push_back(sources[i]);
    if (!plan[i].gather_after) continue;
    placed.push_back(make_tensor_gather(TensorPlace{TensorSplit::none, tensor.rank, tensor.size}));
    placed.back()->set_name(fmt::format("tensor_gather_{}", ++gathers));
    placed_sources.push_back(sources[i]);  // errors name the layer it gathers for
  }
  layers_ = std::move(placed);
  sources = std::move(placed_sources);
}

// Shape inference: each layer's setup declares its variables (in this model's arena when
// the layer is in its part, else in one thrown away) and gives its output shape.
void Model::setup_layers(const std::string& file, const std::vector<LayerSource>& sources) {
  Shape shape = input_shape_;
  ParamArena elsewhere;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = *layers_[i];
    const std::string& key = sources[i].key;
    try {
      shape = layer.setup(shape, i >= part_.first && i < part_.end ? arena_ : elsewhere);
      shape.numel();
    } catch (const ShapeOverflow& e) {
      ConfigTable(*sources[i].table, file, key + ".")
          .fail("type", fmt::format("layer '{}': {}; make the layer or model.input_shape smaller", layer.name(), e.what()));
    } catch (const UserError& e) {  // a layer's own size limits: name the recipe and the key
      throw UserError(fmt::format("{}: {}: {}", file, key, e.what()));
    }
    DT_USER_CHECK(checked_numel(shape.dims()) <= kMaxExtent, "{}: {}: output {} has more than {} elements per example", file,
                  key, shape.str(), kMaxExtent);
    shapes_.push_back(shape);
  }
}

void Model::keep_part(const ModelPart& part, const std::string& file) {
  const size_t end = std::min(part.end, layers_.size());
  DT_USER_CHECK(part.first < end, "{}: a pipeline stage of layers [{}, {}) of {} has no layer", file, part.first, part.end,
                layers_.size());
  if (part.first == 0 && end == layers_.size()) return;
  if (part.first > 0) input_shape_ = shapes_[part.first - 1];
  layers_.erase(layers_.begin() + static_cast<int64_t>(end), layers_.end());
  layers_.erase(layers_.begin(), layers_.begin() + static_cast<int64_t>(part.first));
  shapes_.erase(shapes_.begin() + static_cast<int64_t>(end), shapes_.end());
  shapes_.erase(shapes_.begin(), shapes_.begin() + static_cast<int64_t>(part.first));
}

void Model::find_trainable_ranges() {
  first_trainable_ = layers_.size();
  ranges_.assign(layers_.size(), Range{});
  for (const Variable& v : arena_.variables())
    if (v.trainable)
      for (size_t i = 0; i < layers_.size(); ++i)
        if (layers_[i]->name() == v.layer) {
          first_trainable_ = std::min(first_trainable_, i);
          auto& [lo, hi] = ranges_[i];
          lo = hi == 0 ? v.offset : std::min(lo, v.offset);  // a layer's variables are declared together
          hi = std::max(hi, v.offset + v.shape.numel());
        }
}

int64_t Model::activation_bytes(int64_t n) const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t bytes = 0;
  for (const Shape& s : shapes_) {
    int64_t layer = 0;  // values and gradients, float32
    if (__builtin_mul_overflow(s.numel(), n, &layer) || __builtin_mul_overflow(layer, 2 * 4, &layer) ||
        __builtin_add_overflow(bytes, layer, &bytes))
      return kMax;
  }
  return bytes;
}

void Model::ensure_activations(int64_t n) {
  if (n == batch_) return;
  acts_.clear();
  dacts_.clear();
  for (const Shape& s : shapes_) {
    acts_.emplace_back(backend_, s.batched(n));
    dacts_.emplace_back(backend_, s.batched(n));
  }
  if (input_grad_wanted_) input_grad_ = Buffer(backend_, input_shape_.batched(n));
  batch_ = n;
}

Tensor Model::forward(Ctx& ctx, const Tensor& x) {
  DT_CHECK(x.shape.rank() == input_shape_.rank() + 1, "model input {} for input_shape {}", x.shape.str(),
           input_shape_.str());
  ensure_activations(x.shape[0]);
  input_ = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    gatherer_->gather(i);
    if (clock_) clock_->start();
    layers_[i]->forward(ctx, i ? acts_[i - 1].view() : input_, acts_[i].view());
    if (clock_) clock_->stop_forward(i);
    gatherer_->release(i);
  }
  return acts_.back().view();
}

void Model::backward(Ctx& ctx) {
  // Below the first layer with trainable variables no gradient is needed (unless the input's
  // is wanted): stop there.
  const size_t last = input_grad_wanted_ ? 0 : first_trainable_;
  for (size_t i = layers_.size(); i-- > last;) {
    const Tensor in = i ? acts_[i - 1].view() : input_;
    const Tensor din = i > last ? dacts_[i - 1].view() : i == 0 && input_grad_wanted_ ? input_grad_.view() : Tensor{};
    gatherer_->gather(i);
    reducer_->open(i);
    if (clock_) clock_->start();
    layers_[i]->backward(ctx, in, acts_[i].view(), dacts_[i].view(), din);
    if (clock_) clock_->stop_backward(i);
    gatherer_->release(i);
    reducer_->reduce(i);
  }
}

void Model::forward_without_examples() {
  for (size_t i = 0; i < layers_.size(); ++i) {
    gatherer_->gather(i);
    gatherer_->release(i);
  }
}

void Model::backward_without_examples() {
  for (size_t i = layers_.size(); i-- > (input_grad_wanted_ ? 0 : first_trainable_);) {
    gatherer_->gather(i);
    reducer_->open(i);
    gatherer_->release(i);
    reducer_->reduce(i);
  }
}

std::string Model::summary() const {
  std::map<std::string, int64_t> counts;
  for (const Variable& v : arena_.variables()) counts[v.layer] += v.shape.numel();
  std::string s = fmt::format("{:<22} {:<18} {:<16} {:>10}\n", "layer", "type", "output", "params");
  s += fmt::format("{:<22} {:<18} {:<16} {:>10}\n", "(input)", "", input_shape_.str(), "");
  for (size_t i = 0; i < layers_.size(); ++i)
    s += fmt::format("{:<22} {:<18} {:<16} {:>10}\n", layers_[i]->name(), layers_[i]->type(), shapes_[i].str(),
                     counts[layers_[i]->name()]);
  s += fmt::format("trainable parameters: {}", arena_.trainable_elements());
  return s;
}

}  // namespace distrain
