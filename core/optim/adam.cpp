#include "core/optim/adam.hpp"

namespace distrain {

void Adam::allocate_slots(Backend& backend, int64_t count) {
  m_ = Buffer(backend, Shape{count});
  v_ = Buffer(backend, Shape{count});
  backend.fill(m_.view(), 0.0f);
  backend.fill(v_.view(), 0.0f);
}

void Adam::update_range(Tensor params, const Tensor& grads, Range r, float lr, bool decay) {
  backend_->adam_update(params.range(r.begin, r.size()), grads.range(r.begin, r.size()), m_.view().range(r.begin, r.size()),
                        v_.view().range(r.begin, r.size()),
                        AdamHyper{lr, static_cast<float>(spec_.beta_1), static_cast<float>(spec_.beta_2),
                                  static_cast<float>(spec_.epsilon), decay ? static_cast<float>(spec_.weight_decay) : 0.0f,
                                  iterations_});
}

std::vector<std::pair<std::string, Tensor>> Adam::slots() const { return {{"m", m_.view()}, {"v", v_.view()}}; }

std::string Adam::describe() const {
  return fmt::format("{} (beta_1 {}, beta_2 {}, epsilon {}, weight_decay {} on kernels{})", spec_.type, spec_.beta_1,
                     spec_.beta_2, spec_.epsilon, spec_.weight_decay, clipping(spec_));
}

}  // namespace distrain
