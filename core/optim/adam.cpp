#include "core/optim/adam.hpp"

namespace distrain {

void Adam::bind(Backend& backend, int64_t count) {
  backend_ = &backend;
  m_ = Buffer(backend, Shape{count});
  v_ = Buffer(backend, Shape{count});
  backend.fill(m_.view(), 0.0f);
  backend.fill(v_.view(), 0.0f);
}

void Adam::update(Tensor params, const Tensor& grads, float lr) {
  DT_CHECK(backend_, "optimizer used before bind()");
  ++iterations_;
  backend_->adam_update(params, grads, m_.view(), v_.view(),
                        AdamHyper{lr, static_cast<float>(spec_.beta_1), static_cast<float>(spec_.beta_2),
                                  static_cast<float>(spec_.epsilon), static_cast<float>(spec_.weight_decay),
                                  iterations_});
}

std::vector<std::pair<std::string, Tensor>> Adam::slots() const { return {{"m", m_.view()}, {"v", v_.view()}}; }

std::string Adam::describe() const {
  return fmt::format("{} (beta_1 {}, beta_2 {}, epsilon {}, weight_decay {})", spec_.type, spec_.beta_1, spec_.beta_2,
                     spec_.epsilon, spec_.weight_decay);
}

}  // namespace distrain
