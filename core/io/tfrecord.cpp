#include "core/io/tfrecord.hpp"

#include <fstream>
#include <sstream>

#include "core/base/error.hpp"

namespace distrain {

namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8;

template <typename T>
void append_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

template <typename T>
T read_le(std::string_view bytes) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  return v;
}

}  // namespace

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + kMaskDelta;
}

std::string tfrecord_frame(std::string_view data) {
  std::string length;
  append_le<uint64_t>(length, data.size());
  std::string out = length;
  append_le<uint32_t>(out, masked_crc32c(length));
  out += data;
  append_le<uint32_t>(out, masked_crc32c(data));
  return out;
}

TFRecords read_tfrecords(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DT_USER_CHECK(in, "{}: cannot read", path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  const std::string_view all(bytes);
  TFRecords out;
  for (size_t at = 0; at < all.size();) {
    if (all.size() - at < 12) {
      out.truncated = true;
      break;
    }
    const std::string_view length = all.substr(at, 8);
    DT_USER_CHECK(read_le<uint32_t>(all.substr(at + 8)) == masked_crc32c(length),
                  "{}: record {} at byte {} has a bad length CRC (not a TFRecord file, or corrupt)", path,
                  out.records.size(), at);
    const uint64_t n = read_le<uint64_t>(length);
    const uint64_t left = all.size() - at - 12;
    if (n > left || left - n < 4) {
      out.truncated = true;
      break;
    }
    const std::string_view data = all.substr(at + 12, n);
    DT_USER_CHECK(read_le<uint32_t>(all.substr(at + 12 + n)) == masked_crc32c(data),
                  "{}: record {} at byte {} has a bad data CRC (corrupt)", path, out.records.size(), at);
    out.records.emplace_back(data);
    at += 12 + n + 4;
  }
  return out;
}

}  // namespace distrain
