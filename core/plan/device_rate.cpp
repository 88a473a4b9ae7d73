#include "core/plan/device_rate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>

#include "core/backend/backend.hpp"
#include "core/base/dtype.hpp"
#include "core/base/error.hpp"
#include "core/model/model.hpp"
#include "core/model/no_storage.hpp"
#include "core/layers/layer.hpp"
#include "core/plan/mesh_plan.hpp"
#include "core/plan/plan_layouts.hpp"

namespace distrain {

std::string DeviceRate::str() const {
  return fmt::format("{:g} TFLOP/s, {:g} GB/s", flops_per_s / 1e12, bytes_per_s / 1e9);
}

DeviceRate parse_device_rate(double tflops, const std::string& bandwidth) {
  DT_USER_CHECK(tflops > 0 && tflops <= 1e6, "--device-tflops {:g}: a device's rate must be above 0 and at most 1000000",
                tflops);
  DT_USER_CHECK(!bandwidth.empty(), "--device-tflops needs --device-bandwidth too (the device memory's, e.g. 3.35TB/s): "
                "element-wise layers and the update are priced by the bytes they move");
  static const std::regex kRate(R"(\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(GB|TB|GiB|TiB)/s\s*)");
  static const std::map<std::string, double> kUnits = {{"GB", 1e9}, {"TB", 1e12}, {"GiB", 1073741824.0},
                                                       {"TiB", 1099511627776.0}};
  std::smatch m;
  DT_USER_CHECK(std::regex_match(bandwidth, m, kRate), "--device-bandwidth {}: expected a rate in GB/s, TB/s, GiB/s or "
                "TiB/s (e.g. 3.35TB/s)", bandwidth);
  const double bytes_per_s = std::strtod(m[1].str().c_str(), nullptr) * kUnits.at(m[2]);
  DT_USER_CHECK(bytes_per_s >= 1e9 && bytes_per_s <= 1e15, "--device-bandwidth {}: must be between 1GB/s and 1000TB/s",
                bandwidth);
  return {tflops * 1e12, bytes_per_s};
}

namespace {

// A pass of `flops` and `bytes` in milliseconds: the longer of the two.
double roofline_ms(double flops, double bytes, const DeviceRate& rate) {
  return 1e3 * std::max(flops / rate.flops_per_s, bytes / rate.bytes_per_s);
}

}  // namespace

LayerTimes rated_layer_times(const Recipe& base, int64_t micro, bool bf16, const DeviceRate& rate, int64_t value_bytes) {
  const Model model(base.model(), backend_for(Device{}), storage_free_seams());
  const double n = static_cast<double>(micro), f32 = static_cast<double>(dtype_size(DType::f32));
  const double activation = static_cast<double>(dtype_size(kActivationDType));
  const double weight = static_cast<double>(dtype_size(bf16 ? DType::bf16 : DType::f32));  // as the products read them
  LayerTimes t;
  t.value_bytes = value_bytes;
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    const double outputs = static_cast<double>(model.layer_shapes()[i].numel()) * n;
    const double flops = layer.forward_flops() * n;
    double weights = static_cast<double>(model.trainable_range(i).size());
    if (flops == 0) weights = std::min(weights, outputs);  // a gather reads its rows, a norm its few weights
    const double bytes = (layer.arity() + 1) * outputs * activation + weights * weight;
    t.layer_ms[layer.name()] = {roofline_ms(flops, bytes, rate), roofline_ms(2 * flops, 2 * bytes, rate)};
  }
  // The update reads and writes the float32 weights and the optimizer's slots and reads the
  // gradients (of the whole model on one device: estimate_step takes a rank's share); the
  // rest zeroes and checks the gradients, and the loss reads the logits, writes their
  // gradient and reads it back.
  PlanLayout one_device;
  one_device.bf16 = bf16;
  const RankBytes whole = mesh_rank_bytes(layout_recipe(base, one_device, micro)).at(0);
  const double values = static_cast<double>(whole.values);
  t.update_ms = roofline_ms(0, 3 * values + 2 * static_cast<double>(whole.optimizer), rate);
  const double logits = static_cast<double>(model.output_shape().numel()) * n * f32;
  t.step_ms = roofline_ms(0, 2 * values + 3 * logits, rate);
  return t;
}

}  // namespace distrain
