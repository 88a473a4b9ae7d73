#include "core/base/crc32c.hpp"

#include <array>

namespace distrain {

namespace {

constexpr uint32_t kCastagnoli = 0x82F63B78;  // reflected polynomial 0x1EDC6F41

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kCastagnoli : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  const auto& table = crc_table();
  uint32_t c = 0xffffffff;
  for (char ch : data) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffff;
}

}  // namespace distrain
