#include "core/optim/sgd.hpp"

namespace distrain {

void Sgd::allocate_slots(Backend& backend, int64_t count) {
  if (spec_.momentum != 0.0) {
    velocity_ = Buffer(backend, Shape{count});
    backend.fill(velocity_.view(), 0.0f);
  }
}

void Sgd::update_range(Tensor params, const Tensor& grads, Range r, float lr, bool decay) {
  const Tensor velocity = velocity_.view().empty() ? Tensor{} : velocity_.view().range(r.begin, r.size());
  backend_->sgd_update(params.range(r.begin, r.size()), grads.range(r.begin, r.size()), velocity,
                       SgdHyper{lr, static_cast<float>(spec_.momentum), decay ? static_cast<float>(spec_.weight_decay) : 0.0f,
                                spec_.nesterov});
}

std::vector<std::pair<std::string, Tensor>> Sgd::slots() const {
  if (spec_.momentum == 0.0) return {};
  return {{"momentum", velocity_.view()}};
}

std::string Sgd::describe() const {
  return fmt::format("sgd (momentum {}, nesterov {}, weight_decay {} on kernels{})", spec_.momentum, spec_.nesterov,
                     spec_.weight_decay, clipping(spec_));
}

}  // namespace distrain
