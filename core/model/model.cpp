#include "core/model/model.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/base/config_table.hpp"
#include "core/layers/registry.hpp"

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

Model::Model(const toml::table& model, const std::string& file, Backend& backend, ModelSeams seams)
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

  std::map<std::string, int> per_type;
  std::set<std::string> names;
  Shape shape = input_shape_;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string prefix = fmt::format("model.layers[{}].", i);
    const toml::table* t = (*list)[i].as_table();
    DT_USER_CHECK(t, "{}: {}: expected a table", file, prefix.substr(0, prefix.size() - 1));
    ConfigTable layer_config(*t, file, prefix);
    auto layer = create_layer(layer_config);
    const int k = ++per_type[layer->type()];
    if (layer->name().empty()) layer->set_name(fmt::format("{}_{}", layer->type(), k));
    if (!names.insert(layer->name()).second) layer_config.fail("name", fmt::format("layer name '{}' is used twice", layer->name()));
    layer->set_index(static_cast<int>(i));
    try {
      shape = layer->setup(shape, arena_);
      shape.numel();
    } catch (const ShapeOverflow& e) {
      layer_config.fail("type", fmt::format("layer '{}': {}; make the layer or model.input_shape smaller", layer->name(), e.what()));
    } catch (const UserError& e) {  // a layer's own size limits: name the recipe and the key
      throw UserError(fmt::format("{}: {}: {}", file, prefix.substr(0, prefix.size() - 1), e.what()));
    }
    DT_USER_CHECK(checked_numel(shape.dims()) <= kMaxExtent, "{}: {}: output {} has more than {} elements per example", file,
                  prefix.substr(0, prefix.size() - 1), shape.str(), kMaxExtent);
    shapes_.push_back(shape);
    layers_.push_back(std::move(layer));
  }
  arena_.allocate(backend_);
  find_trainable_ranges();
  gatherer_->attach(arena_, ranges_);
  reducer_->attach(arena_, ranges_);
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
  batch_ = n;
}

Tensor Model::forward(Ctx& ctx, const Tensor& x) {
  DT_CHECK(x.shape.rank() == input_shape_.rank() + 1, "model input {} for input_shape {}", x.shape.str(),
           input_shape_.str());
  ensure_activations(x.shape[0]);
  input_ = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    gatherer_->gather(i);
    layers_[i]->forward(ctx, i ? acts_[i - 1].view() : input_, acts_[i].view());
    gatherer_->release(i);
  }
  return acts_.back().view();
}

void Model::backward(Ctx& ctx) {
  // Below the first layer with trainable variables no gradient is needed: stop there.
  for (size_t i = layers_.size(); i-- > first_trainable_;) {
    const Tensor in = i ? acts_[i - 1].view() : input_;
    const Tensor din = i > first_trainable_ ? dacts_[i - 1].view() : Tensor{};
    gatherer_->gather(i);
    reducer_->open(i);
    layers_[i]->backward(ctx, in, acts_[i].view(), dacts_[i].view(), din);
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
  for (size_t i = layers_.size(); i-- > first_trainable_;) {
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
