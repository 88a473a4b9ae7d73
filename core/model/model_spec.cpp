#include "core/model/model_spec.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

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

// Names an `inputs` entry can refer to: the layers built so far in this list (a repeat's
// copy has its own), then the enclosing lists'; "input" is the list's input (a block's,
// or the model's).
struct Scope {
  std::map<std::string, int> names;
  std::map<std::string, int> per_type;  // default names <type>_<k>
  int input = -1;
  const Scope* parent = nullptr;
  std::string prefix;  // of the layer names made here: "h.2."
  int previous = -2;   // the last layer built in this list (-2: none yet, then `input`)
  int block = -1;      // the outermost repeat copy this list is in (-1: none)
  std::optional<int> find(const std::string& name) const {
    if (name == "input") return input;
    if (auto it = names.find(name); it != names.end()) return it->second;
    return parent ? parent->find(name) : std::nullopt;
  }
  int default_input() const { return previous == -2 ? input : previous; }
};

// Builds the spec's layers from the recipe's lists, expanding repeat blocks.
class GraphReader {
 public:
  GraphReader(ModelSpec& spec, std::vector<std::unique_ptr<Layer>>& layers) : spec_(spec), layers_(layers) {}

  // The layers of `list` after those read so far; returns the index of the last one.
  int read_list(const toml::array& list, const std::string& key, Scope& scope) {
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string item = fmt::format("{}[{}]", key, i);
      const toml::table* t = list[i].as_table();
      DT_USER_CHECK(t, "{}: {}: expected a table", spec_.file, item);
      const toml::node* type = t->get("type");
      scope.previous = type && type->value<std::string>() == "repeat" ? read_repeat(*t, item, scope) : read_layer(*t, item, scope);
    }
    return scope.default_input();
  }

 private:
  // One layer; its input defaults to the layer before it in its list (or the list's input).
  int read_layer(const toml::table& table, const std::string& key, Scope& scope) {
    ConfigTable config(table, spec_.file, key + ".");
    if (spec_.layers.size() >= ModelSpec::kMaxLayers)  // nested repeat blocks multiply: stop before memory runs out
      config.fail("type", fmt::format("the model has more than {} layers; make the repeat counts smaller", ModelSpec::kMaxLayers));
    std::vector<int> inputs;
    for (const std::string& name : config.get_string_list("inputs", {})) {
      const std::optional<int> at = scope.find(name);
      if (!at) config.fail("inputs", fmt::format("no layer named '{}' before this one", name));
      inputs.push_back(*at);
    }
    auto layer = create_layer(config);
    if (inputs.empty()) inputs.assign(1, scope.default_input());
    if (static_cast<int>(inputs.size()) != layer->arity())
      config.fail("inputs", fmt::format("{} takes {} input{}, got {}", layer->type(), layer->arity(),
                                        layer->arity() == 1 ? "" : "s", inputs.size()));
    const std::string local = layer->name().empty() ? fmt::format("{}_{}", layer->type(), ++scope.per_type[layer->type()])
                                                    : layer->name();
    const int index = static_cast<int>(spec_.layers.size());
    if (!scope.names.emplace(local, index).second) config.fail("name", fmt::format("layer name '{}' is used twice", local));
    layer->set_name(scope.prefix + local);
    layer->set_index(index);
    spec_.layers.push_back(LayerSpec{key, config.where("type"), std::move(inputs), nullptr, Shape{}, scope.block});
    layers_.push_back(std::move(layer));
    return index;
  }

  // type = "repeat": `count` copies of its `layers` one after the other, copy k's layers
  // named <name>.<k>.<layer>; each copy's input is the previous copy's output.
  int read_repeat(const toml::table& table, const std::string& key, Scope& scope) {
    ConfigTable config(table, spec_.file, key + ".");
    config.get_string("type");
    const int64_t count = config.get_int("count");
    if (count < 1 || count > static_cast<int64_t>(ModelSpec::kMaxLayers))
      config.fail("count", fmt::format("must be in [1, {}]", ModelSpec::kMaxLayers));
    const std::string name = config.get_string("name", fmt::format("block_{}", ++scope.per_type["repeat"]));
    if (name.empty() || name == "input" || name.find('/') != std::string::npos)
      config.fail("name", "must be non-empty, not \"input\", without '/'");
    const toml::node* layers = config.raw("layers");
    const toml::array* list = layers ? layers->as_array() : nullptr;
    if (!list || list->empty())
      config.fail("layers", fmt::format("missing or empty: add [[{}.layers]] tables after it", key.substr(0, key.rfind('['))));
    std::optional<int> input;
    for (const std::string& in : config.get_string_list("inputs", {})) {
      if (input) config.fail("inputs", "a repeat block takes one input");
      input = scope.find(in);
      if (!input) config.fail("inputs", fmt::format("no layer named '{}' before this one", in));
    }
    config.finish();
    int last = input.value_or(scope.default_input());
    for (int64_t k = 0; k < count; ++k) {
      Scope copy{{}, {}, last, &scope, fmt::format("{}{}.{}.", scope.prefix, name, k), -2,
                 scope.block >= 0 ? scope.block : spec_.blocks++};
      last = read_list(*list, key + ".layers", copy);
    }
    if (!scope.names.emplace(name, last).second) config.fail("name", fmt::format("layer name '{}' is used twice", name));
    return last;
  }

  ModelSpec& spec_;
  std::vector<std::unique_ptr<Layer>>& layers_;
};

// Layer names key the checkpoint's groups: two layers with one full name (a top-level
// "h.0.ln_1" beside repeat block h's first ln_1) would collide only when a checkpoint is
// written, after the whole run.
void check_unique_names(const ModelSpec& spec, const std::vector<std::unique_ptr<Layer>>& layers) {
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < layers.size(); ++i)
    if (const auto [at, fresh] = first.emplace(layers[i]->name(), i); !fresh)
      spec.fail(i, fmt::format("layer name '{}' is also the name of {}; layer names must be unique", layers[i]->name(),
                               spec.layers[at->second].key));
}

// Every output but the model's feeds a layer (else its gradient would be undefined), and
// the layers that read the model's input agree on its element type.
void check_graph(ModelSpec& spec, const std::vector<std::unique_ptr<Layer>>& layers) {
  std::vector<bool> used(layers.size(), false);
  std::optional<DType> input_type;
  for (size_t i = 0; i < layers.size(); ++i)
    for (const int j : spec.layers[i].inputs) {
      if (j >= 0) {
        used[static_cast<size_t>(j)] = true;
        continue;
      }
      const DType type = layers[i]->input_dtype();
      if (input_type && *input_type != type)
        spec.fail(i, fmt::format("layer '{}' reads the model's input as {}, another as {}", layers[i]->name(),
                                 dtype_name(type), dtype_name(*input_type)));
      input_type = type;
    }
  spec.input_dtype = input_type.value_or(DType::f32);
  for (size_t i = 0; i + 1 < layers.size(); ++i)
    if (!used[i])
      spec.fail(i, fmt::format("the output of layer '{}' goes nowhere: the last layer is the model's output, every other must "
                               "feed a later one (name it in `inputs`)",
                               layers[i]->name()));
}

// GPT-2's residual projections learn the total number of them; then each layer's output
// shape, from a copy set up into an arena nobody allocates.
void infer_shapes(ModelSpec& spec, const std::vector<std::unique_ptr<Layer>>& layers) {
  int residual_projections = 0;
  for (const auto& layer : layers) residual_projections += layer->residual_projections();
  ParamArena nowhere;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (residual_projections) layers[i]->set_residual_projections(residual_projections);
    std::vector<Shape> in;
    for (const int j : spec.layers[i].inputs) in.push_back(j < 0 ? spec.input_shape : spec.layers[static_cast<size_t>(j)].output);
    spec.layers[i].output = infer_output_shape(spec, i, *copy_layer(*layers[i]), in, nowhere);
  }
}

}  // namespace

bool ModelSpec::chain() const {
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i].inputs != std::vector<int>{static_cast<int>(i) - 1}) return false;
  return true;
}

void ModelSpec::fail(size_t i, const std::string& message) const {
  throw UserError(fmt::format("{}: {}: {}", layers.at(i).where, layers.at(i).key, message));
}

std::vector<std::vector<size_t>> readers_of(const std::vector<std::vector<int>>& inputs) {
  std::vector<std::vector<size_t>> readers(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    for (const int j : inputs[i])
      if (j >= 0) readers[static_cast<size_t>(j)].push_back(i);
  return readers;
}

Shape infer_output_shape(const ModelSpec& spec, size_t i, Layer& layer, const std::vector<Shape>& in, ParamArena& arena) {
  Shape shape;
  try {
    shape = layer.setup_inputs(in, arena);
    shape.numel();
  } catch (const ShapeOverflow& e) {
    spec.fail(i, fmt::format("layer '{}': {}; make the layer or model.input_shape smaller", layer.name(), e.what()));
  } catch (const UserError& e) {  // a layer's own size limits: name the recipe and the key
    spec.fail(i, e.what());
  }
  if (checked_numel(shape.dims()) > kMaxExtent)
    spec.fail(i, fmt::format("output {} has more than {} elements per example", shape.str(), kMaxExtent));
  return shape;
}

ModelSpec parse_model_spec(const toml::table& model, const std::string& file) {
  ModelSpec spec;
  spec.file = file;
  ConfigTable config(model, file, "model.");
  std::vector<int64_t> dims = config.get_int_list("input_shape");
  if (dims.empty() || std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d <= 0; }))
    config.fail("input_shape", "expected an array of positive integers such as [28, 28, 1]");
  if (checked_numel(dims) > kMaxExtent) config.fail("input_shape", fmt::format("more than {} elements per example", kMaxExtent));
  spec.input_shape = Shape(std::move(dims));
  const toml::node* list = config.raw("layers");
  if (!list || !list->as_array() || list->as_array()->empty())
    config.fail("layers", "missing or empty: add [[model.layers]] tables");
  config.finish();
  std::vector<std::unique_ptr<Layer>> layers;
  Scope top;
  GraphReader(spec, layers).read_list(*list->as_array(), "model.layers", top);
  check_unique_names(spec, layers);
  check_graph(spec, layers);
  infer_shapes(spec, layers);
  for (size_t i = 0; i < layers.size(); ++i) spec.layers[i].prototype = std::move(layers[i]);
  return spec;
}

}  // namespace distrain
