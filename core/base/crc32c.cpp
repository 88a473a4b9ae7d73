#include "core/base/crc32c.hpp"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

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

#if defined(__x86_64__)
// SSE 4.2's crc32 instruction computes this very polynomial, 8 bytes per instruction:
// checkpoints of GPT sizes (gigabytes of weights and Adam state) are summed on every save
// and load, which a table lookup per byte made take tens of seconds.
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(std::string_view data) {
  const char* p = data.data();
  size_t n = data.size();
  uint64_t c = 0xffffffff;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, static_cast<uint8_t>(*p));
  return c32 ^ 0xffffffff;
}

const bool kHaveSse42 = __builtin_cpu_supports("sse4.2");
#endif

}  // namespace

uint32_t crc32c_portable(std::string_view data) {
  const auto& table = crc_table();
  uint32_t c = 0xffffffff;
  for (char ch : data) c = table[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffff;
}

uint32_t crc32c(std::string_view data) {
#if defined(__x86_64__)
  if (kHaveSse42) return crc32c_sse42(data);
#endif
  return crc32c_portable(data);
}

}  // namespace distrain
