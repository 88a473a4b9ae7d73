// NumPy .npy arrays of examples to predict (numpy.save): uint8 or float32 (or float64,
// converted), little-endian, C order, shaped (N, ...) with the model's input shape after N
// (a trailing channel of 1 may be left out: (N, 28, 28) for (28, 28, 1) images).
#pragma once
#include <string>

#include "datasets/dataset.hpp"

namespace distrain {

// A UserError names the file and what is wrong: not NPY, a type or order this reader does
// not take, a shape that is not (N, input_shape), data cut short.
Dataset read_npy_examples(const std::string& path, const Shape& input_shape);

// Whether the file starts with NPY's magic.
bool is_npy_file(const std::string& path);

}  // namespace distrain
