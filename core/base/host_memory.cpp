#include "core/base/host_memory.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

namespace distrain {

std::optional<int64_t> available_host_memory() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string key, unit;
    int64_t kib = 0;
    if (fields >> key >> kib >> unit && key == "MemAvailable:" && kib >= 0 &&
        kib <= std::numeric_limits<int64_t>::max() / 1024)
      return kib * 1024;
  }
  return std::nullopt;
}

std::string format_bytes(int64_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(kUnits)) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.2f} {}", v, kUnits[u]);
}

}  // namespace distrain
