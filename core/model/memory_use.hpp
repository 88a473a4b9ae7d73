// MemoryUse: the bytes one replica of a model holds, for `distrain check`, `plan` and `bench`.
#pragma once
#include <cstdint>

namespace distrain {

// Variables (trainable and state), gradients, optimizer slots, and activations with their
// gradients for a batch.
struct MemoryUse {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0;  // on the device
  int64_t offloaded = 0;  // optimizer state in host memory (strategy.offload_optimizer)
  int64_t device_total() const { return parameters + gradients + optimizer + activations; }
};

}  // namespace distrain
