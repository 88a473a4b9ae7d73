// What a zero replica holds on its device, predicted from the recipe alone on a model that
// keeps no storage, byte for byte what the built strategy's memory_per_replica reports
// (tested): for `distrain plan`, which weighs models too big to build here. Mirrors the
// buffers of zero_gatherers.hpp and zero_reducers.hpp for strategy.zero_stage.
#pragma once
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

MemoryUse zero_memory_per_replica(const Recipe& recipe, int replicas);

}  // namespace distrain
