#include "core/model/model.hpp"

#include <map>
#include <set>

#include "core/layers/registry.hpp"

namespace distrain {

namespace {

Shape parse_input_shape(const toml::table& model, const std::string& where) {
  const toml::node* n = model.get("input_shape");
  DT_USER_CHECK(n, "{}: model.input_shape is missing (e.g. input_shape = [28, 28, 1])", where);
  const toml::array* a = n->as_array();
  std::vector<int64_t> dims;
  if (a)
    for (const auto& d : *a)
      if (d.is_integer() && d.as_integer()->get() > 0) dims.push_back(d.as_integer()->get());
  DT_USER_CHECK(a && !a->empty() && dims.size() == a->size(), "{}: model.input_shape (line {}): expected an array of positive integers such as [28, 28, 1]",
                where, n->source().begin.line);
  return Shape(std::move(dims));
}

}  // namespace

Model::Model(const toml::table& model, const std::string& where, Backend& backend)
    : backend_(backend), input_shape_(parse_input_shape(model, where)) {
  for (const auto& [k, v] : model) {
    const std::string key(k.str());
    DT_USER_CHECK(key == "input_shape" || key == "layers", "{}: model.{} (line {}): unknown key (expected input_shape, layers)",
                  where, key, v.source().begin.line);
  }
  const toml::array* list = model["layers"].as_array();
  DT_USER_CHECK(list && !list->empty(), "{}: model.layers is missing or empty (add [[model.layers]] tables)", where);

  std::map<std::string, int> per_type;
  std::set<std::string> names;
  Shape shape = input_shape_;
  for (size_t i = 0; i < list->size(); ++i) {
    const toml::table* t = (*list)[i].as_table();
    DT_USER_CHECK(t, "{}: model.layers[{}] is not a table", where, i);
    LayerConfig config(*t, fmt::format("{}: model.layers[{}]", where, i));
    const std::optional<std::string> given = config.name();
    auto layer = create_layer(config);
    layer->set_name(given ? *given : fmt::format("{}_{}", layer->type(), ++per_type[layer->type()]));
    if (given) ++per_type[layer->type()];
    DT_USER_CHECK(names.insert(layer->name()).second, "{}: model.layers[{}]: layer name '{}' is used twice", where, i,
                  layer->name());
    layer->set_index(static_cast<int>(i));
    shape = layer->setup(shape, arena_);
    shapes_.push_back(shape);
    layers_.push_back(std::move(layer));
  }
  arena_.allocate(backend_);
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
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i]->forward(ctx, i ? acts_[i - 1].view() : input_, acts_[i].view());
  return acts_.back().view();
}

void Model::backward(Ctx& ctx) {
  for (size_t i = layers_.size(); i-- > 0;) {
    const Tensor in = i ? acts_[i - 1].view() : input_;
    const Tensor din = i ? dacts_[i - 1].view() : Tensor{};
    layers_[i]->backward(ctx, in, acts_[i].view(), dacts_[i].view(), din);
  }
}

void Model::zero_grads() {
  if (arena_.grads().numel()) backend_.fill(arena_.grads(), 0.0f);
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
