// DeviceData: a dataset's examples kept on one device, uploaded once (pixels as uint8, a
// quarter of their float32 size), so that each batch is gathered there from the epoch's
// shuffled indices (Backend::gather_examples) instead of being built and copied by the
// host at every step. Replicas that share a device share its DeviceData.
#pragma once
#include "core/tensor/buffer.hpp"
#include "datasets/dataset.hpp"

namespace distrain {

// What a split on the device is for: the training steps' batches, or evaluation's.
enum class DataUse { training, evaluation };

class DeviceData {
 public:
  DeviceData(Backend& backend, const Dataset& data);

  Tensor examples() const { return examples_.view(); }  // (N, example...) uint8 or float32
  Tensor labels() const { return labels_.view(); }      // (N) int32

  // Bytes it takes on the device.
  static int64_t bytes(const Dataset& data);

 private:
  Buffer examples_, labels_;
};

}  // namespace distrain
