// Where a run keeps a split (data.placement): on its replicas' devices, each batch
// gathered there from indices (DeviceData), or on the host, each batch built and uploaded.
// `train`, `eval` and `bench` decide alike; the training split first.
#pragma once
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

// Puts `split` on the strategy's devices for `use` when the recipe asks for it ("device",
// or "auto" with a GPU among strategy.devices) and the strategy can; true when it did, and
// the loader should then give indices (LoaderSpec::indices_only).
bool place_data_on_devices(const Recipe& recipe, Strategy& strategy, const Dataset& split, DataUse use);

}  // namespace distrain
