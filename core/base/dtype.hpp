// Element types. Only f32 is computed today; i32 carries labels. bf16 is declared so
// interfaces already carry a DType and mixed precision does not change signatures.
#pragma once
#include <cstddef>
#include <string_view>

namespace distrain {

enum class DType { f32, i32, bf16 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::i32: return 4;
    case DType::bf16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::i32: return "int32";
    case DType::bf16: return "bfloat16";
  }
  return "?";
}

}  // namespace distrain
