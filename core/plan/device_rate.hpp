// Step times for devices that are not here: `distrain plan --device-tflops F
// --device-bandwidth B` prices each layer from its work instead of a profile taken on this
// machine. A pass takes the longer of its floating-point operations at F (Layer::
// forward_flops; the backward pass twice the forward's) and the bytes it moves at B (its
// output's size in float32 activations once for each input and once written, and the
// weights its products read (bf16 under bf16), or as many as its output for a layer
// without products (an embedding reads only its rows); twice in the backward pass): a
// roofline, as published planners size a GPU step. The update moves the float32 weights,
// gradients and optimizer slots once; the rest of the step zeroes and checks the gradients
// and reads the logits.
#pragma once
#include <cstdint>
#include <string>

#include "core/io/recipe.hpp"
#include "core/plan/plan_cost.hpp"

namespace distrain {

struct DeviceRate {
  double flops_per_s = 0, bytes_per_s = 0;
  bool given() const { return flops_per_s > 0; }
  std::string str() const;  // "400 TFLOP/s, 3350 GB/s"
};

// From --device-tflops (dense matrix products of the precision weighed) and
// --device-bandwidth ("3.35TB/s", "900GB/s", "2TiB/s"). Throws UserError naming the flag.
DeviceRate parse_device_rate(double tflops, const std::string& bandwidth);

// The LayerTimes of `base`'s model at a micro-batch of `micro` examples in bf16 or float32
// on a device of `rate`; `value_bytes`: the whole model's trainable values.
LayerTimes rated_layer_times(const Recipe& base, int64_t micro, bool bf16, const DeviceRate& rate, int64_t value_bytes);

}  // namespace distrain
