// Element types. Layers compute in f32; i32 carries labels; f64 carries the small
// cross-replica sums of batch-norm statistics; u8 the pixels of a dataset kept on a device
// (DeviceData); bf16 the operand copies of bf16 matrix products and the activations kept
// under train.precision = "bf16".
#pragma once
#include <cstddef>
#include <string_view>

namespace distrain {

enum class DType { f32, i32, f64, bf16, u8 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::i32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::u8: return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::i32: return "int32";
    case DType::f64: return "float64";
    case DType::bf16: return "bfloat16";
    case DType::u8: return "uint8";
  }
  return "?";
}

}  // namespace distrain
