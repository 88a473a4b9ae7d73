#include "core/train/data_placement.hpp"

#include <limits>

#include "core/base/log.hpp"
#include "datasets/device_data.hpp"

namespace distrain {

namespace {

bool any_gpu(const Recipe& recipe) {
  for (const std::string& d : recipe.strategy.devices)
    if (!Device::parse(d, recipe.file + ": strategy.devices").is_cpu()) return true;
  return false;
}

}  // namespace

bool place_data_on_devices(const Recipe& recipe, Strategy& strategy, const Dataset& split, DataUse use) {
  const std::string& placement = recipe.data.placement;
  // Token windows start anywhere in the stream: the loader cuts them on the host.
  DT_USER_CHECK(!split.token_data() || placement != "device", "{}: data.placement = \"device\" is not available for "
                "token data (data.dataset = \"{}\"); use \"auto\" or \"host\"", recipe.file, recipe.data.dataset);
  if (split.token_data()) return false;
  if (placement == "host" || (placement == "auto" && !any_gpu(recipe))) return false;
  const bool asked = placement == "device";
  const char* what = use == DataUse::training ? "training" : "test";
  // Indices travel as int32; "auto" gives a split a quarter of the device's free memory at most.
  const int64_t bytes = DeviceData::bytes(split), free = strategy.model().params().backend().free_bytes();
  const bool indexable = split.size() < std::numeric_limits<int32_t>::max();
  const bool fits = free < 0 || bytes <= (asked ? free : free / 4);
  if (!asked && (!indexable || !fits)) return false;
  DT_USER_CHECK(indexable, "{}: data.placement = \"device\": the {} split's {} examples are more than a device's index "
                "holds; use \"host\"", recipe.file, what, split.size());
  DT_USER_CHECK(fits, "{}: data.placement = \"device\": the {} split takes {:.1f} MiB, the device has {:.1f} MiB free; "
                "use \"host\"", recipe.file, what, static_cast<double>(bytes) / (1 << 20),
                static_cast<double>(free) / (1 << 20));
  if (strategy.keep_data_on_devices(split, use)) return true;
  if (asked && use == DataUse::training)
    log::warn("{}: data.placement = \"device\": strategy {} takes batches from the host", recipe.file, strategy.name());
  return false;
}

}  // namespace distrain
