// NumPy .npy arrays of examples to predict (numpy.save): uint8 or float32 (or float64,
// converted), little-endian, C order, shaped (N, ...) with the model's input shape after N
// (a trailing channel of 1 may be left out: (N, 28, 28) for (28, 28, 1) images).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.hpp"

namespace distrain {

// A UserError names the file and what is wrong: not NPY, a type or order this reader does
// not take, a shape that is not (N, input_shape), data cut short.
Dataset read_npy_examples(const std::string& path, const Shape& input_shape);

// Token windows (N, length) of int32 or int64 ids, for a language model's logits.
struct TokenWindows {
  int64_t count = 0;
  std::vector<int32_t> ids;
};
TokenWindows read_npy_token_windows(const std::string& path, int64_t length);

// Whether the file starts with NPY's magic.
bool is_npy_file(const std::string& path);

}  // namespace distrain
