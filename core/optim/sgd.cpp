#include "core/optim/sgd.hpp"

namespace distrain {

void Sgd::bind(Backend& backend, int64_t count) {
  backend_ = &backend;
  if (spec_.momentum != 0.0) {
    velocity_ = Buffer(backend, Shape{count});
    backend.fill(velocity_.view(), 0.0f);
  }
}

void Sgd::update(Tensor params, const Tensor& grads, float lr) {
  DT_CHECK(backend_, "optimizer used before bind()");
  backend_->sgd_update(params, grads, velocity_.view(),
                       SgdHyper{lr, static_cast<float>(spec_.momentum), static_cast<float>(spec_.weight_decay),
                                spec_.nesterov});
  ++iterations_;
}

std::vector<std::pair<std::string, Tensor>> Sgd::slots() const {
  if (spec_.momentum == 0.0) return {};
  return {{"momentum", velocity_.view()}};
}

std::string Sgd::describe() const {
  return fmt::format("sgd (momentum {}, nesterov {}, weight_decay {})", spec_.momentum, spec_.nesterov,
                     spec_.weight_decay);
}

}  // namespace distrain
