#include "core/optim/optimizer.hpp"

#include <algorithm>

#include "core/optim/adam.hpp"
#include "core/optim/sgd.hpp"

namespace distrain {

std::vector<std::string> Optimizer::slot_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : slots()) names.push_back(name);
  return names;
}

Tensor Optimizer::slot(const std::string& name) const {
  for (const auto& [n, t] : slots())
    if (n == name) return t;
  throw Error(fmt::format("optimizer {} has no slot '{}'", type(), name));
}

void Optimizer::bind(Backend& backend, int64_t count, const std::vector<Range>& decayed) {
  backend_ = &backend;
  static const std::string kPurpose = "the optimizer's state";
  const MemoryPurpose purpose(kPurpose);
  allocate_slots(backend, count);
  segments_.clear();
  int64_t at = 0;
  for (const Range& r : decayed) {
    DT_CHECK(r.begin >= at && r.end <= count, "decayed range [{}, {}) out of order or past {}", r.begin, r.end, count);
    if (r.begin > at) segments_.push_back({{at, r.begin}, false});
    if (!r.empty()) segments_.push_back({r, true});
    at = std::max(at, r.end);
  }
  if (at < count) segments_.push_back({{at, count}, false});
}

void Optimizer::update(Tensor params, const Tensor& grads, float lr, float gradient_scale) {
  DT_CHECK(backend_, "optimizer used before bind()");
  ++iterations_;
  if (gradient_scale != 1.0f) backend_->scale_shift(grads, grads, gradient_scale, 0.0f);
  for (const Segment& s : segments_) update_range(params, grads, s.range, lr, s.decay);
}

std::string clipping(const OptimizerSpec& spec) {
  return spec.clip_norm > 0 ? fmt::format(", clip_norm {}", spec.clip_norm) : "";
}

OptimizerSpec default_optimizer_spec(const std::string& type) {
  OptimizerSpec s;
  s.type = type;
  if (type == "sgd") s.learning_rate = 0.01;
  if (type == "adamw") s.weight_decay = 0.004;
  return s;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec) {
  if (spec.type == "sgd") return std::make_unique<Sgd>(spec);
  if (spec.type == "adam" || spec.type == "adamw") return std::make_unique<Adam>(spec);
  throw UserError(fmt::format("optimizer.type: unknown optimizer '{}' (known: sgd, adam, adamw)", spec.type));
}

}  // namespace distrain
