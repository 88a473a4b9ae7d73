#include "core/layers/registry.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/base/json.hpp"

namespace distrain {

namespace {
struct Registered {
  LayerFactory factory;
  LayerCopier copier;
};
std::map<std::string, Registered>& factories() {
  static std::map<std::string, Registered> f;
  return f;
}
// A layer's name is an HDF5 group in checkpoints (/model/<name>/kernel): a '/' would nest
// groups, "." names the group itself, and HDF5 refuses an empty name. Found here, not at
// the first save after hours of training.
void check_layer_name(ConfigTable& config, const std::string& name) {
  if (name.empty() || name == "." || name.find('/') != std::string::npos || name.find('\0') != std::string::npos)
    config.fail("name", fmt::format("'{}' cannot name a checkpoint group: use a non-empty name without '/' (not \".\"), "
                                    "or leave it out for the default <type>_<k>",
                                    name));
}

}  // namespace

Json Layer::settings() const { return Json::object(); }

void Layer::fail(const std::string& message) const { throw UserError(fmt::format("layer '{}': {}", name_, message)); }

Communicator& Layer::tensor_group(Ctx& ctx) const {
  DT_CHECK(ctx.tensor, "layer '{}' is split over the tensor axis but has no tensor communicator", name_);
  return *ctx.tensor;
}

void Layer::matmul(Ctx& ctx, bool ta, bool tb, const Tensor& a, const Tensor& b, float beta, Tensor c) const {
  if (matmul_dtype_ == DType::bf16) return ctx.backend.gemm_bf16(ta, tb, a, b, beta, c);
  ctx.backend.gemm(ta, tb, 1.0f, a, b, beta, c);
}

int64_t Layer::linear_scratch_bytes(int64_t rows, int64_t in, int64_t out) const {
  if (matmul_dtype_ != DType::bf16) return 0;
  return std::max({bf16_gemm_scratch_bytes(rows, in, out), bf16_gemm_scratch_bytes(in, rows, out),
                   bf16_gemm_scratch_bytes(rows, out, in)});
}

namespace {
bool shares_operand(DType matmul, int64_t width) { return matmul == DType::bf16 && width % 8 == 0; }
}  // namespace

Tensor Layer::shared_operand(Ctx& ctx, const Tensor& x, Buffer& copy, bool both_products) const {
  if (!both_products || !shares_operand(matmul_dtype_, x.shape[x.shape.rank() - 1])) return x;
  copy = Buffer(ctx.backend, x.shape, DType::bf16);
  ctx.backend.rounded_bf16(x, copy.view());
  return copy.view();
}

int64_t Layer::shared_operand_bytes(int64_t rows, int64_t width) const {
  return shares_operand(matmul_dtype_, width) ? 2 * rows * width : 0;
}

std::optional<TensorSplit> parse_tensor_request(const std::string& value) {
  if (value == "auto") return std::nullopt;
  if (value == "column") return TensorSplit::column;
  if (value == "row") return TensorSplit::row;
  return value == "heads" ? TensorSplit::heads : TensorSplit::none;
}

void Layer::set_tensor_place(const TensorPlace& place) {
  DT_CHECK(can_split(place.split), "layer '{}' ({}) cannot be split that way", name_, type());
  DT_CHECK(place.degree >= 1 && place.rank >= 0 && place.rank < place.degree, "tensor rank {} of {}", place.rank, place.degree);
  place_ = place;
}

bool register_layer(const std::string& type, LayerFactory factory, LayerCopier copier) {
  DT_CHECK(factories().emplace(type, Registered{std::move(factory), std::move(copier)}).second,
           "layer type '{}' registered twice", type);
  return true;
}

std::vector<std::string> known_layer_types() {
  std::vector<std::string> names;
  for (const auto& [k, v] : factories()) names.push_back(k);
  return names;
}

std::unique_ptr<Layer> create_layer(ConfigTable& config) {
  const std::string type = config.get_string("type");
  auto it = factories().find(type);
  if (it == factories().end())
    config.fail("type", fmt::format("unknown layer type '{}' (known: {})", type, fmt::join(known_layer_types(), ", ")));
  const std::string name = config.get_string("name", "");
  if (config.has("name")) check_layer_name(config, name);
  auto layer = it->second.factory(config);
  config.finish();
  layer->set_name(name);
  return layer;
}

std::unique_ptr<Layer> copy_layer(const Layer& prototype) {
  auto it = factories().find(prototype.type());
  DT_CHECK(it != factories().end(), "layer '{}' of unregistered type '{}'", prototype.name(), prototype.type());
  auto layer = it->second.copier(prototype);
  DT_CHECK(layer->type() == prototype.type(), "copying layer '{}' of type '{}'", prototype.name(), prototype.type());
  return layer;
}

}  // namespace distrain
