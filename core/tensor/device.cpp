#include "core/tensor/device.hpp"

#include <charconv>
#include <set>

#include "core/base/error.hpp"

namespace distrain {

Device Device::parse(std::string_view text, std::string_view what) {
  Device d;
  std::string_view kind = text;
  std::string_view index;
  if (auto colon = text.find(':'); colon != std::string_view::npos) {
    kind = text.substr(0, colon);
    index = text.substr(colon + 1);
  }
  if (kind == "cpu") {
    d.type = DeviceType::cpu;
  } else if (kind == "cuda" || kind == "gpu") {
    d.type = DeviceType::cuda;
  } else {
    throw UserError(fmt::format("{}: unknown device '{}' (expected \"cpu:N\" or \"cuda:N\")", what, text));
  }
  if (!index.empty()) {
    auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), d.index);
    DT_USER_CHECK(ec == std::errc() && end == index.data() + index.size() && d.index >= 0,
                  "{}: bad device index in '{}' (expected \"{}:N\" with N >= 0)", what, text, kind);
  }
  return d;
}

bool shares_a_gpu(const std::vector<Device>& devices) {
  std::set<int> seen;
  for (const Device& d : devices)
    if (d.is_cuda() && !seen.insert(d.index).second) return true;
  return false;
}

}  // namespace distrain
