#include "core/model/gradient_reducer.hpp"

#include "core/backend/backend.hpp"

namespace distrain {

void FullGradients::attach(ParamArena& arena, const std::vector<Range>&) {
  backend_ = &arena.backend();
  grads_ = Buffer(*backend_, Shape{arena.trainable_arena_size()});
  zero();
  arena.bind_grads(0, grads_.view());
}

void FullGradients::zero() {
  if (!grads_.empty()) backend_->fill(grads_.view(), 0.0f);
}

}  // namespace distrain
