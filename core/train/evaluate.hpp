// Loss and accuracy of a strategy's current variables over a whole dataset, in
// inference mode, accumulated as sums and counts; with several workers each evaluates a
// share and the sums are combined.
#pragma once
#include "core/strategy/strategy.hpp"

namespace distrain {

// on_devices: `data` was placed on the strategy's devices for evaluation
// (place_data_on_devices), so batches travel as indices.
LossStats evaluate_dataset(Strategy& strategy, const Dataset& data, int64_t batch_size, bool on_devices);

}  // namespace distrain
