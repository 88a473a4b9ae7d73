#include "core/model/param_gatherer.hpp"

#include "core/backend/backend.hpp"

namespace distrain {

void FullValues::attach(ParamArena& arena, const std::vector<Range>&) {
  values_ = Buffer(arena.backend(), Shape{arena.trainable_arena_size()});
  if (!values_.empty()) arena.backend().fill(values_.view(), 0.0f);
  arena.bind_values(0, values_.view());
}

}  // namespace distrain
