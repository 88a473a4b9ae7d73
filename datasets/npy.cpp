#include "datasets/npy.hpp"

#include <fmt/ranges.h>

#include <cstring>
#include <fstream>
#include <filesystem>

#include "core/base/error.hpp"

namespace distrain {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr uint32_t kMaxHeader = 65536;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// The text after `key` and a colon in the header dict (spaces skipped), or "".
std::string after_key(const std::string& dict, const std::string& key) {
  const size_t at = dict.find("'" + key + "'");
  if (at == std::string::npos) return "";
  size_t i = dict.find(':', at);
  if (i == std::string::npos) return "";
  for (++i; i < dict.size() && dict[i] == ' ';) ++i;
  return dict.substr(i);
}

// The header dict, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (3, 28, 28), },
// read by hand: it is short (numpy writes it, at most kMaxHeader bytes) and untrusted.
NpyHeader parse_header(const std::string& dict, const std::string& path) {
  NpyHeader h;
  const std::string descr = after_key(dict, "descr");
  const size_t close = descr.size() > 1 ? descr.find('\'', 1) : std::string::npos;
  DT_USER_CHECK(!descr.empty() && descr[0] == '\'' && close != std::string::npos, "{}: an NPY header without 'descr'", path);
  h.descr = descr.substr(1, close - 1);
  const std::string order = after_key(dict, "fortran_order");
  DT_USER_CHECK(order.rfind("True", 0) == 0 || order.rfind("False", 0) == 0, "{}: an NPY header without 'fortran_order'",
                path);
  h.fortran_order = order.rfind("True", 0) == 0;
  const std::string shape = after_key(dict, "shape");
  const size_t end = shape.find(')');
  DT_USER_CHECK(!shape.empty() && shape[0] == '(' && end != std::string::npos, "{}: an NPY header without 'shape'", path);
  std::string digits;
  for (size_t i = 1; i <= end; ++i) {
    const char c = shape[i];
    if (c >= '0' && c <= '9') {
      digits += c;
      DT_USER_CHECK(digits.size() <= 12, "{}: an NPY dimension of more than 12 digits", path);
    } else if (c == ',' || c == ')') {
      if (!digits.empty()) h.shape.push_back(std::stoll(digits));
      digits.clear();
    } else {
      DT_USER_CHECK(c == ' ', "{}: an NPY shape that is not a tuple of integers", path);
    }
  }
  return h;
}

}  // namespace

bool is_npy_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[6] = {};
  in.read(magic, 6);
  return in.gcount() == 6 && std::memcmp(magic, kMagic, 6) == 0;
}

namespace {

// Reads `path`'s NPY header from `in` (just opened), leaving `in` at the data.
NpyHeader read_npy_header(std::ifstream& in, const std::string& path) {
  DT_USER_CHECK(in, "{}: cannot open", path);
  char start[10] = {};
  in.read(start, 10);
  DT_USER_CHECK(in.gcount() == 10 && std::memcmp(start, kMagic, 6) == 0, "{}: not an NPY file (numpy.save)", path);
  const auto major = static_cast<uint8_t>(start[6]);
  DT_USER_CHECK(major >= 1 && major <= 3, "{}: NPY version {} (this reader takes 1 to 3)", path, major);
  uint32_t length = static_cast<uint8_t>(start[8]) | static_cast<uint32_t>(static_cast<uint8_t>(start[9])) << 8;
  if (major >= 2) {  // a 4-byte length: the two bytes read and two more
    char more[2] = {};
    in.read(more, 2);
    length |= static_cast<uint32_t>(static_cast<uint8_t>(more[0])) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(more[1])) << 24;
  }
  DT_USER_CHECK(length <= kMaxHeader, "{}: an NPY header of {} bytes (numpy writes at most {})", path, length, kMaxHeader);
  std::string dict(length, '\0');
  in.read(dict.data(), length);
  DT_USER_CHECK(in.gcount() == static_cast<std::streamsize>(length), "{}: the NPY header is cut short", path);
  NpyHeader h = parse_header(dict, path);
  DT_USER_CHECK(!h.fortran_order, "{}: a Fortran-order array; save it in C order (numpy.ascontiguousarray)", path);
  return h;
}

// The data's bytes, checked against what is left of the file before any is allocated.
std::vector<char> read_npy_data(std::ifstream& in, const std::string& path, size_t bytes) {
  std::error_code ec;
  const auto file_bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  const int64_t left = ec ? 0 : file_bytes - static_cast<int64_t>(in.tellg());
  DT_USER_CHECK(static_cast<int64_t>(bytes) <= left, "{}: {} bytes of data where the shape needs {}", path, left, bytes);
  std::vector<char> raw(bytes);
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  DT_USER_CHECK(in.gcount() == static_cast<std::streamsize>(raw.size()), "{}: {} bytes of data where the shape needs {}",
                path, in.gcount(), raw.size());
  return raw;
}

}  // namespace

Dataset read_npy_examples(const std::string& path, const Shape& input_shape) {
  std::ifstream in(path, std::ios::binary);
  DT_USER_CHECK(in, "{}: cannot open", path);
  const NpyHeader h = read_npy_header(in, path);
  const bool bytes = h.descr == "|u1" || h.descr == "u1" || h.descr == "<u1";
  const bool f32 = h.descr == "<f4", f64 = h.descr == "<f8";
  DT_USER_CHECK(bytes || f32 || f64, "{}: NPY type '{}'; this reader takes uint8, float32 or float64 (little-endian)", path,
                h.descr);
  // (N, input_shape), or (N, H, W) for (H, W, 1).
  const std::vector<int64_t> want = input_shape.dims();
  const std::vector<int64_t> got(h.shape.begin() + (h.shape.empty() ? 0 : 1), h.shape.end());
  const bool grey_without_channel = want.size() == 3 && want[2] == 1 && got.size() == 2 && got[0] == want[0] && got[1] == want[1];
  DT_USER_CHECK(!h.shape.empty() && (got == want || grey_without_channel), "{}: an array of shape ({}); the model takes (N, {})", path,
                fmt::join(h.shape, ", "), fmt::join(input_shape.dims(), ", "));
  const int64_t n = h.shape[0], per = input_shape.numel();
  DT_USER_CHECK(n > 0 && n <= (int64_t{1} << 40) / std::max<int64_t>(per, 1), "{}: {} examples", path, n);
  Dataset d;
  d.source = path;
  d.example_shape = input_shape;
  const auto count = static_cast<size_t>(n * per);
  const size_t width = bytes ? 1 : (f32 ? 4 : 8);
  const std::vector<char> raw = read_npy_data(in, path, count * width);
  if (bytes) {
    d.pixels.assign(raw.begin(), raw.end());
  } else if (f32) {
    d.floats.resize(count);
    std::memcpy(d.floats.data(), raw.data(), raw.size());
  } else {
    d.floats.resize(count);
    for (size_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, raw.data() + i * 8, 8);
      d.floats[i] = static_cast<float>(v);
    }
  }
  return d;
}

TokenWindows read_npy_token_windows(const std::string& path, int64_t length) {
  std::ifstream in(path, std::ios::binary);
  DT_USER_CHECK(in, "{}: cannot open", path);
  const NpyHeader h = read_npy_header(in, path);
  const bool i32 = h.descr == "<i4", i64 = h.descr == "<i8";
  DT_USER_CHECK(i32 || i64, "{}: NPY type '{}'; token ids are int32 or int64 (little-endian)", path, h.descr);
  DT_USER_CHECK(h.shape.size() == 2 && h.shape[1] == length && h.shape[0] > 0 && h.shape[0] <= (int64_t{1} << 30),
                "{}: an array of shape ({}); the model takes token windows (N, {})", path, fmt::join(h.shape, ", "), length);
  TokenWindows w{h.shape[0], {}};
  const auto count = static_cast<size_t>(w.count * length);
  const std::vector<char> raw = read_npy_data(in, path, count * (i32 ? 4 : 8));
  w.ids.resize(count);
  for (size_t i = 0; i < count; ++i) {
    int64_t v = 0;
    if (i32) {
      int32_t x;
      std::memcpy(&x, raw.data() + i * 4, 4);
      v = x;
    } else {
      std::memcpy(&v, raw.data() + i * 8, 8);
    }
    DT_USER_CHECK(v >= 0 && v <= INT32_MAX, "{}: token id {} at {}", path, v, i);
    w.ids[i] = static_cast<int32_t>(v);
  }
  return w;
}

}  // namespace distrain
