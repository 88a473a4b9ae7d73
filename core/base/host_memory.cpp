#include "core/base/host_memory.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
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

std::optional<int64_t> parse_byte_count(const std::string& text) {
  static const std::map<std::string, double> kUnits = {
      {"", 1},          {"B", 1},         {"KiB", 1024.0},  {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  size_t unit = end;
  while (unit < text.size() && text[unit] == ' ') ++unit;
  const auto it = kUnits.find(text.substr(unit));
  if (it == kUnits.end() || !(value >= 0)) return std::nullopt;
  const double bytes = std::round(value * it->second);
  if (!(bytes < 9.2e18) || (value > 0 && bytes < 1)) return std::nullopt;  // "0.4B" is no size, not "no budget"

  return static_cast<int64_t>(bytes);
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

std::string format_mib(int64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1 << 20);
  return bytes == 0 || mib >= 0.01 ? fmt::format("{:.2f} MiB", mib) : fmt::format("{:.3g} MiB", mib);
}

}  // namespace distrain
