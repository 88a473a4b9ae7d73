// Hugging Face's safetensors files (https://huggingface.co/docs/safetensors): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape and byte
// range in the data that follows, then the data. Read with every claim of the header
// checked against the file before a byte is trusted; written as the library writes them
// (header padded to 8 bytes, tensors in name order, contiguous).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/base/shape.hpp"

namespace distrain {

// The element types distrain reads and writes: float32, bfloat16, float16.
enum class StDType { f32, bf16, f16 };
const char* st_dtype_name(StDType t);  // "F32", "BF16", "F16"
size_t st_dtype_size(StDType t);

struct StEntry {
  StDType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;  // bytes of the data section
};

class SafetensorsFile {
 public:
  // Reads and checks the header; UserError naming the file (and the tensor) otherwise.
  explicit SafetensorsFile(std::string path);
  const std::string& path() const { return path_; }
  const std::map<std::string, StEntry>& entries() const { return entries_; }
  bool has(const std::string& name) const { return entries_.contains(name); }
  const StEntry& entry(const std::string& name) const;
  // A tensor's bytes as stored, and its values widened to float32 (exactly).
  std::vector<uint8_t> bytes(const std::string& name) const;
  std::vector<float> floats(const std::string& name) const;

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  std::map<std::string, StEntry> entries_;
};

struct StTensor {
  std::string name;
  StDType dtype;
  Shape shape;
  std::vector<uint8_t> bytes;  // as stored
};
// float32 values narrowed to `dtype` (round to nearest even) as stored bytes.
std::vector<uint8_t> st_bytes(const std::vector<float>& values, StDType dtype);
// Writes `tensors` (any order; stored by name) with `metadata` ({"format": "pt"} as
// transformers writes it) to path, atomically (a temporary file renamed).
void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace distrain
