#include "core/tensor/param_arena.hpp"

#include <cmath>

#include "core/backend/backend.hpp"
#include "core/base/rng.hpp"

namespace distrain {

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

int64_t round_up(int64_t n) { return (n + ParamArena::kAlign - 1) / ParamArena::kAlign * ParamArena::kAlign; }

// Keras' initializers. he_normal is a truncated normal (|z| <= 2) with the stddev
// corrected for truncation, as tf.keras.initializers.HeNormal.
// out[i] = draw(an Rng at element i's first draw), for draws of `per_element` numbers each.
// An Rng's state is a counter, so each element starts at its own and the loop gives the
// serial stream's values on any number of threads (GPT-2 124M: 124M normals at start-up).
template <typename Draw>
void draw_each(uint64_t stream, int per_element, std::vector<float>& out, const Draw& draw) {
  const auto n = static_cast<int64_t>(out.size());
#pragma omp parallel for schedule(static) if (n > (int64_t{1} << 16))
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(stream + static_cast<uint64_t>(i) * static_cast<uint64_t>(per_element));
    out[static_cast<size_t>(i)] = draw(rng);
  }
}

void draw(const Variable& v, uint64_t seed, std::vector<float>& out) {
  const uint64_t stream = derive_seed(seed, fnv1a(v.layer + "/" + v.name));
  Rng rng(stream);
  switch (v.init) {
    case Init::zeros: std::fill(out.begin(), out.end(), 0.0f); break;
    case Init::ones: std::fill(out.begin(), out.end(), 1.0f); break;
    case Init::glorot_uniform: {
      const double limit = std::sqrt(6.0 / static_cast<double>(v.fan_in + v.fan_out));
      draw_each(stream, 1, out, [&](Rng& r) { return static_cast<float>(r.uniform(-limit, limit)); });
      break;
    }
    case Init::normal:
      draw_each(stream, 2, out, [&](Rng& r) { return static_cast<float>(r.normal() * v.stddev); });
      break;
    case Init::he_normal: {
      const double stddev = std::sqrt(2.0 / static_cast<double>(v.fan_in)) / 0.87962566103423978;
      for (float& x : out) {
        double z;
        do z = rng.normal(); while (std::abs(z) > 2.0);
        x = static_cast<float>(z * stddev);
      }
      break;
    }
  }
}

}  // namespace

Init parse_init(const std::string& name) {
  if (name == "glorot_uniform") return Init::glorot_uniform;
  if (name == "he_normal") return Init::he_normal;
  if (name == "zeros") return Init::zeros;
  if (name == "normal") return Init::normal;
  DT_CHECK(name == "ones", "unknown initializer '{}'", name);
  return Init::ones;
}

Tensor ParamRef::value() const { return arena->value(id); }
Tensor ParamRef::grad() const { return arena->grad(id); }

ParamRef ParamArena::declare(std::string layer, std::string name, Shape shape, Init init, int64_t fan_in,
                             int64_t fan_out, bool trainable, TensorSlice slice, double stddev) {
  DT_CHECK(!backend_, "variable {}/{} declared after allocation", layer, name);
  int64_t& size = trainable ? values_size_ : state_size_;
  Shape held = slice_shape(shape, slice);
  Variable v{std::move(layer), std::move(name), std::move(held), init, fan_in, fan_out, trainable, size, std::move(shape),
             slice, stddev};
  size = round_up(size + v.shape.numel());
  variables_.push_back(std::move(v));
  return ParamRef{this, static_cast<int>(variables_.size()) - 1};
}

void ParamArena::allocate(Backend& backend) {
  DT_CHECK(!backend_, "arena allocated twice");
  backend_ = &backend;
  state_ = Buffer(backend, Shape{state_size_});
  if (!state_.empty()) backend.fill(state_.view(), 0.0f);
}

void ParamArena::bind_values(int64_t begin, Tensor storage) {
  values_begin_ = begin;
  values_ = storage;
}

Tensor ParamArena::bound_values(Range r) const {
  DT_CHECK(!values_.empty() && r.begin >= values_begin_ && r.end <= values_begin_ + values_.numel(),
           "values [{}, {}) requested outside the bound range [{}, {})", r.begin, r.end, values_begin_, values_begin_ + values_.numel());
  return values_.range(r.begin - values_begin_, r.size());
}

void ParamArena::bind_grads(int64_t begin, Tensor storage) {
  grads_begin_ = begin;
  grads_ = storage;
}

void ParamArena::share_state(Tensor storage) {
  DT_CHECK(storage.numel() == state_size_, "shared state of {} elements for an arena of {}", storage.numel(), state_size_);
  state_ = Buffer();
  shared_state_ = storage;
}

Tensor ParamArena::whole(int64_t begin, const Tensor& bound) const {
  if (!bound.empty() && begin == 0 && bound.numel() == values_size_) return bound;
  return Tensor{nullptr, Shape{0}, DType::f32, backend_ ? backend_->device() : Device{}};
}

Tensor ParamArena::view_in(int id, int64_t begin, const Tensor& bound, const char* what) const {
  const Variable& v = variables_.at(static_cast<size_t>(id));
  DT_CHECK(!bound.empty(), "{} of {}/{} requested with no storage bound", what, v.layer, v.name);
  DT_CHECK(v.offset >= begin && v.offset + v.shape.numel() <= begin + bound.numel(),
           "{} of {}/{} requested outside the bound range [{}, {})", what, v.layer, v.name, begin, begin + bound.numel());
  return bound.range(v.offset - begin, v.shape.numel()).reshaped(v.shape);
}

void ParamArena::initialize(uint64_t seed) {
  DT_CHECK(backend_, "initialize before allocate");
  for (size_t i = 0; i < variables_.size(); ++i)
    backend_->upload(initial_value(static_cast<int>(i), seed).data(), value(static_cast<int>(i)));
}

std::vector<float> ParamArena::initial_value(int id, uint64_t seed) const {
  const Variable& v = variables_.at(static_cast<size_t>(id));
  return slice_of(whole_initial_value(id, seed), v.full_shape, v.slice);
}

std::vector<float> ParamArena::whole_initial_value(int id, uint64_t seed) const {
  const Variable& v = variables_.at(static_cast<size_t>(id));
  std::vector<float> whole(static_cast<size_t>(v.full_shape.numel()));
  draw(v, seed, whole);
  return whole;
}

Tensor ParamArena::value(int id) const {
  const Variable& v = variables_.at(static_cast<size_t>(id));
  if (v.trainable) return view_in(id, values_begin_, values_, "value");
  return state().range(v.offset, v.shape.numel()).reshaped(v.shape);
}

Tensor ParamArena::grad(int id) const {
  const Variable& v = variables_.at(static_cast<size_t>(id));
  DT_CHECK(v.trainable, "{}/{} is not trainable and has no gradient", v.layer, v.name);
  return view_in(id, grads_begin_, grads_, "gradient");
}

int ParamArena::find(const std::string& layer, const std::string& name) const {
  for (size_t i = 0; i < variables_.size(); ++i)
    if (variables_[i].layer == layer && variables_[i].name == name) return static_cast<int>(i);
  return -1;
}

int64_t ParamArena::trainable_elements() const {
  int64_t n = 0;
  for (const Variable& v : variables_)
    if (v.trainable) n += v.shape.numel();
  return n;
}

}  // namespace distrain
