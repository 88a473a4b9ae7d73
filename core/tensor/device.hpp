// Device: where a buffer lives and a backend computes ("cpu:0", "cuda:1").
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace distrain {

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const {
    if (*this == host()) return "host";
    return (type == DeviceType::cpu ? "cpu:" : "cuda:") + std::to_string(index);
  }
  // The process's own memory, apart from any device (what offloading uses): not a device a
  // recipe can name, and no device budget applies to it.
  static constexpr Device host() { return Device{DeviceType::cpu, -1}; }
  bool operator==(const Device&) const = default;

  // Parses "cpu", "cpu:0", "cuda", "cuda:3"; throws UserError naming `what` otherwise.
  static Device parse(std::string_view text, std::string_view what);
};

// True when one GPU is listed twice (logical devices sharing a card). NCCL refuses two
// ranks on one GPU, so such replicas must reduce their gradients another way.
bool shares_a_gpu(const std::vector<Device>& devices);

}  // namespace distrain
