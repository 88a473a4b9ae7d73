#include "core/train/data_placement.hpp"

#include <limits>

namespace distrain {

namespace {

bool any_gpu(const Recipe& recipe) {
  for (const std::string& d : recipe.strategy.devices)
    if (!Device::parse(d, recipe.file + ": strategy.devices").is_cpu()) return true;
  return false;
}

}  // namespace

bool place_data_on_devices(const Recipe& recipe, Strategy& strategy, const Dataset& train) {
  const std::string& placement = recipe.data.placement;
  if (placement == "host" || (placement == "auto" && !any_gpu(recipe))) return false;
  // Indices travel as int32.
  DT_USER_CHECK(train.size() < std::numeric_limits<int32_t>::max(),
                "{}: data.placement = \"{}\": {} examples are more than a device's index holds; use \"host\"",
                recipe.file, placement, train.size());
  return strategy.keep_data_on_devices(train);
}

}  // namespace distrain
