#include "datasets/utf8.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/base/error.hpp"

namespace distrain {

namespace {

// The length of the sequence a lead byte starts (0: not a lead byte) and its payload bits.
int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;  // 0xc0, 0xc1 only start overlong forms
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;  // beyond 0xf4: past U+10FFFF
  return 0;
}

// The smallest code point each length may carry: anything below is an overlong form.
constexpr char32_t kMinimum[5] = {0, 0, 0x80, 0x800, 0x10000};

}  // namespace

namespace {

// The code point at text[i] and its length in bytes; 0 bytes: invalid UTF-8 there.
std::pair<char32_t, int> next_code_point(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const int n = sequence_length(lead);
  char32_t cp = n == 1 ? lead : lead & (0x7f >> n);
  bool ok = n > 0 && i + static_cast<size_t>(n) <= text.size();
  for (int k = 1; ok && k < n; ++k) {
    const auto next = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
    ok = (next & 0xc0) == 0x80;
    cp = (cp << 6) | (next & 0x3f);
  }
  ok = ok && cp >= kMinimum[n] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
  return {cp, ok ? n : 0};
}

[[noreturn]] void invalid_at(std::string_view text, size_t i, const std::string& source, const std::string& hint) {
  throw UserError(fmt::format("{}: invalid UTF-8 at byte offset {} (byte 0x{:02x}){}", source, i,
                              static_cast<unsigned char>(text[i]), hint));
}

}  // namespace

std::vector<char32_t> decode_utf8(std::string_view text, const std::string& source, const std::string& hint) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto [cp, n] = next_code_point(text, i);
    if (n == 0) invalid_at(text, i, source, hint);
    out.push_back(cp);
    i += static_cast<size_t>(n);
  }
  return out;
}

void check_utf8(std::string_view text, const std::string& source) {
  for (size_t i = 0; i < text.size();) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {  // ASCII, most of most text
      ++i;
      continue;
    }
    const int n = next_code_point(text, i).second;
    if (n == 0) invalid_at(text, i, source, "");
    i += static_cast<size_t>(n);
  }
}

void append_utf8(std::string& out, char32_t cp) {
  auto put = [&](unsigned v) { out.push_back(static_cast<char>(v)); };
  if (cp < 0x80) {
    put(cp);
  } else if (cp < 0x800) {
    put(0xc0 | (cp >> 6)), put(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    put(0xe0 | (cp >> 12)), put(0x80 | ((cp >> 6) & 0x3f)), put(0x80 | (cp & 0x3f));
  } else {
    put(0xf0 | (cp >> 18)), put(0x80 | ((cp >> 12) & 0x3f)), put(0x80 | ((cp >> 6) & 0x3f)), put(0x80 | (cp & 0x3f));
  }
}

std::string describe_code_point(char32_t cp) {
  const std::string code = fmt::format("U+{:04X}", static_cast<uint32_t>(cp));
  // Controls (C0, DEL, C1) would break a one-line message; they are named by number alone.
  if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) return code;
  std::string shown;
  append_utf8(shown, cp);
  return fmt::format("'{}' ({})", shown, code);
}

}  // namespace distrain
