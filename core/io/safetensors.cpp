#include "core/io/safetensors.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/base/error.hpp"
#include "core/base/json.hpp"

namespace distrain {

namespace {

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // the library's own limit: 100 MB

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw UserError(fmt::format("{}: not a safetensors file this version reads: {}", path, why));
}

StDType parse_dtype(const std::string& path, const std::string& tensor, const std::string& name) {
  if (name == "F32") return StDType::f32;
  if (name == "BF16") return StDType::bf16;
  if (name == "F16") return StDType::f16;
  throw UserError(fmt::format("{}: tensor '{}' is {}; distrain reads F32, BF16 and F16", path, tensor, name));
}

// IEEE half precision by its bits (no _Float16: not every compiler here has it on x86).
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant x 2^-24, exact in float
    const float f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  const uint32_t bits = exp == 31 ? (sign | 0x7f800000u | mant << 13) : (sign | (exp + 112) << 23 | mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {  // round to nearest even; past 65504 infinity
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {  // below half's smallest normal: a subnormal (or zero) of 2^-24 steps
    float x;
    std::memcpy(&x, &a, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(x * 16777216.0f)));
  }
  uint32_t h = ((a >> 23) - 112) << 10 | (a & 0x7fffffu) >> 13;
  const uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent, as it should
  return static_cast<uint16_t>(sign | h);
}

uint16_t float_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace

const char* st_dtype_name(StDType t) {
  switch (t) {
    case StDType::f32: return "F32";
    case StDType::bf16: return "BF16";
    case StDType::f16: return "F16";
  }
  return "?";
}

size_t st_dtype_size(StDType t) { return t == StDType::f32 ? 4 : 2; }

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw UserError(fmt::format("{}: cannot open", path_));
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path_, ec);
  if (ec || size < 8) bad(path_, "shorter than its 8-byte header length");
  unsigned char n8[8];
  in.read(reinterpret_cast<char*>(n8), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | n8[i];
  if (n > kMaxHeader || n > size - 8) bad(path_, fmt::format("a header of {} bytes in a file of {}", n, size));
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  data_start_ = 8 + n;
  const uint64_t data_size = size - data_start_;
  const Json header = Json::parse(text, nullptr, false);
  if (!header.is_object()) bad(path_, "its header is not a JSON object");
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets") ||
        !e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      bad(path_, fmt::format("tensor '{}' lacks dtype, shape or data_offsets", name));
    StEntry s;
    s.dtype = parse_dtype(path_, name, e["dtype"].get<std::string>());
    std::vector<int64_t> dims;
    uint64_t elements = 1;
    for (const Json& d : e["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) bad(path_, fmt::format("tensor '{}' has a bad shape", name));
      dims.push_back(d.get<int64_t>());
      elements *= d.get<uint64_t>();
      if (elements > (uint64_t{1} << 40)) bad(path_, fmt::format("tensor '{}' is too large", name));
    }
    s.shape = Shape(std::move(dims));
    for (const Json& o : e["data_offsets"])
      if (!o.is_number_unsigned()) bad(path_, fmt::format("tensor '{}' has bad data_offsets", name));
    s.begin = e["data_offsets"][0].get<uint64_t>();
    s.end = e["data_offsets"][1].get<uint64_t>();
    if (s.begin > s.end || s.end > data_size)
      bad(path_, fmt::format("tensor '{}' claims bytes [{}, {}) of {} in the file", name, s.begin, s.end, data_size));
    if (s.end - s.begin != elements * st_dtype_size(s.dtype))
      bad(path_, fmt::format("tensor '{}' claims {} bytes for {} {} values", name, s.end - s.begin, elements,
                             st_dtype_name(s.dtype)));
    ranges.emplace_back(s.begin, s.end);
    entries_.emplace(name, std::move(s));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) bad(path_, "two tensors claim the same bytes");
}

const StEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) throw UserError(fmt::format("{}: has no tensor '{}'", path_, name));
  return it->second;
}

std::vector<uint8_t> SafetensorsFile::bytes(const std::string& name) const {
  const StEntry& e = entry(name);
  std::vector<uint8_t> out(e.end - e.begin);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + e.begin));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!in) throw UserError(fmt::format("{}: cannot read tensor '{}' (the file changed?)", path_, name));
  return out;
}

std::vector<float> SafetensorsFile::floats(const std::string& name) const {
  const StDType dtype = entry(name).dtype;
  const std::vector<uint8_t> raw = bytes(name);
  const size_t n = raw.size() / st_dtype_size(dtype);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == StDType::f32) {
      std::memcpy(&out[i], &raw[4 * i], 4);
      continue;
    }
    uint16_t bits;
    std::memcpy(&bits, &raw[2 * i], 2);
    if (dtype == StDType::f16) {
      out[i] = half_to_float(bits);
    } else {
      const uint32_t u = uint32_t{bits} << 16;
      std::memcpy(&out[i], &u, 4);
    }
  }
  return out;
}

std::vector<uint8_t> st_bytes(const std::vector<float>& values, StDType dtype) {
  std::vector<uint8_t> out(values.size() * st_dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == StDType::f32) {
      std::memcpy(&out[4 * i], &values[i], 4);
      continue;
    }
    const uint16_t bits = dtype == StDType::f16 ? float_to_half(values[i]) : float_to_bf16(values[i]);
    std::memcpy(&out[2 * i], &bits, 2);
  }
  return out;
}

void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<const StTensor*> order;
  for (const StTensor& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const StTensor* a, const StTensor* b) { return a->name < b->name; });
  nlohmann::json header = nlohmann::json::object();  // keys in name order, as the library writes them
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const StTensor* t : order) {
    DT_CHECK(t->bytes.size() == static_cast<size_t>(t->shape.numel()) * st_dtype_size(t->dtype), "safetensors {}", t->name);
    header[t->name] = {{"dtype", st_dtype_name(t->dtype)}, {"shape", t->shape.dims()},
                       {"data_offsets", {offset, offset + t->bytes.size()}}};
    offset += t->bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UserError(fmt::format("{}: cannot create", path));
    unsigned char n8[8];
    for (int i = 0; i < 8; ++i) n8[i] = static_cast<unsigned char>(static_cast<uint64_t>(text.size()) >> (8 * i));
    out.write(reinterpret_cast<const char*>(n8), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const StTensor* t : order) out.write(reinterpret_cast<const char*>(t->bytes.data()), static_cast<std::streamsize>(t->bytes.size()));
    out.flush();
    if (!out) throw UserError(fmt::format("{}: cannot write (disk full?)", path));
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace distrain
